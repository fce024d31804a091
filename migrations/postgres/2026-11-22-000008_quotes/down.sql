DROP TABLE quotes;
