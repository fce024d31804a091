DROP TABLE email_tokens;
DROP TABLE sessions;
DROP TABLE users;
