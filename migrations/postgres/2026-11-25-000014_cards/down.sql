DROP TABLE card_wallet_tokens;
DROP TABLE card_transactions;
DROP TABLE cards;
