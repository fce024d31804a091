-- Human identity (decisions §9): people who log in with a password and a
-- session cookie. Each user owns the merchant created with them at
-- registration and acts on it with every scope.
CREATE TABLE users (
    id TEXT PRIMARY KEY NOT NULL,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    -- Trimmed and lowercased, so uniqueness is case-insensitive.
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    -- An argon2id PHC string (algorithm, parameters, salt and hash).
    password_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'disabled')),
    email_verified_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE INDEX users_by_merchant ON users (merchant_id, created_at);

-- Sessions: only the SHA-256 of the 256-bit cookie token is stored, so a
-- read of this table cannot be replayed as a cookie. Rows are never
-- deleted by a request: logout and password resets set revoked_at.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id),
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);

CREATE INDEX sessions_by_user ON sessions (user_id);

-- Single-use tokens mailed to a user: email verification (24 h) and
-- password reset (1 h). Stored hashed like sessions; used_at marks use.
CREATE TABLE email_tokens (
    token_sha256 TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id),
    purpose TEXT NOT NULL CHECK (purpose IN ('verify_email', 'password_reset')),
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at TIMESTAMP
);

CREATE INDEX email_tokens_by_user ON email_tokens (user_id, purpose);
