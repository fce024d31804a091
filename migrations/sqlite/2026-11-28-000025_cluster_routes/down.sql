DROP TABLE cluster_routes;
