-- Four columns read as enums had no CHECK, unlike every other status,
-- network or asset column: text that is not one of the enum's codes could
-- be written by hand (or by a bug) and then failed every read of its row,
-- a card list included. The database now refuses it, as it does for the
-- others. Every code Tern ever wrote is in these lists (the enums only grew).
-- NOT VALID: rows already written are not checked, so a row someone edited
-- by hand cannot stop the upgrade (only that row's reads fail, as on
-- SQLite, whose triggers check new writes only); every new write is.
ALTER TABLE cards ADD CONSTRAINT cards_wallet_status_code
    CHECK (wallet_status IN ('none', 'requested', 'provisioning', 'active', 'suspended', 'removed', 'failed')) NOT VALID;
ALTER TABLE cards ADD CONSTRAINT cards_replaces_status_code
    CHECK (replaces_status IS NULL OR replaces_status IN ('issuing', 'active', 'frozen', 'blocked', 'closed')) NOT VALID;
ALTER TABLE card_transactions ADD CONSTRAINT card_transactions_decline_reason_code
    CHECK (decline_reason IS NULL OR decline_reason IN (
    'card_frozen', 'card_blocked', 'card_closed', 'card_not_issued', 'currency_mismatch',
    'invalid_amount', 'online_disabled', 'international_disabled', 'atm_disabled',
    'per_transaction_limit_exceeded', 'daily_limit_exceeded', 'monthly_limit_exceeded',
    'atm_daily_limit_exceeded', 'insufficient_funds', 'merchant_inactive', 'user_disabled',
    'amount_too_large', 'duplicate_authorization')) NOT VALID;
ALTER TABLE settlements ADD CONSTRAINT settlements_asset_code
    CHECK (asset IS NULL OR asset IN ('USDT', 'USDC')) NOT VALID;
