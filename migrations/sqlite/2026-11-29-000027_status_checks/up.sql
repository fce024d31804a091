-- Four columns read as enums had no CHECK, unlike every other status,
-- network or asset column: text that is not one of the enum's codes could
-- be written by hand (or by a bug) and then failed every read of its row,
-- a card list included. The database now refuses it, as it does for the
-- others. Every code Tern ever wrote is in these lists (the enums only grew).
-- SQLite cannot add a CHECK to a table without rebuilding it, so triggers
-- refuse the write instead, on insert and on update of the column.

CREATE TRIGGER cards_wallet_status_code_insert BEFORE INSERT ON cards
WHEN NEW.wallet_status NOT IN (
    'none', 'requested', 'provisioning', 'active', 'suspended', 'removed', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: cards.wallet_status is not a known code');
END;

CREATE TRIGGER cards_wallet_status_code_update BEFORE UPDATE OF wallet_status ON cards
WHEN NEW.wallet_status NOT IN (
    'none', 'requested', 'provisioning', 'active', 'suspended', 'removed', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: cards.wallet_status is not a known code');
END;

CREATE TRIGGER cards_replaces_status_code_insert BEFORE INSERT ON cards
WHEN NEW.replaces_status IS NOT NULL AND NEW.replaces_status NOT IN (
    'issuing', 'active', 'frozen', 'blocked', 'closed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: cards.replaces_status is not a known code');
END;

CREATE TRIGGER cards_replaces_status_code_update BEFORE UPDATE OF replaces_status ON cards
WHEN NEW.replaces_status IS NOT NULL AND NEW.replaces_status NOT IN (
    'issuing', 'active', 'frozen', 'blocked', 'closed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: cards.replaces_status is not a known code');
END;

CREATE TRIGGER card_transactions_decline_reason_code_insert BEFORE INSERT ON card_transactions
WHEN NEW.decline_reason IS NOT NULL AND NEW.decline_reason NOT IN (
    'card_frozen', 'card_blocked', 'card_closed', 'card_not_issued', 'currency_mismatch',
    'invalid_amount', 'online_disabled', 'international_disabled', 'atm_disabled',
    'per_transaction_limit_exceeded', 'daily_limit_exceeded', 'monthly_limit_exceeded',
    'atm_daily_limit_exceeded', 'insufficient_funds', 'merchant_inactive', 'user_disabled',
    'amount_too_large', 'duplicate_authorization')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: card_transactions.decline_reason is not a known code');
END;

CREATE TRIGGER card_transactions_decline_reason_code_update BEFORE UPDATE OF decline_reason ON card_transactions
WHEN NEW.decline_reason IS NOT NULL AND NEW.decline_reason NOT IN (
    'card_frozen', 'card_blocked', 'card_closed', 'card_not_issued', 'currency_mismatch',
    'invalid_amount', 'online_disabled', 'international_disabled', 'atm_disabled',
    'per_transaction_limit_exceeded', 'daily_limit_exceeded', 'monthly_limit_exceeded',
    'atm_daily_limit_exceeded', 'insufficient_funds', 'merchant_inactive', 'user_disabled',
    'amount_too_large', 'duplicate_authorization')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: card_transactions.decline_reason is not a known code');
END;

CREATE TRIGGER settlements_asset_code_insert BEFORE INSERT ON settlements
WHEN NEW.asset IS NOT NULL AND NEW.asset NOT IN (
    'USDT', 'USDC')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: settlements.asset is not a known code');
END;

CREATE TRIGGER settlements_asset_code_update BEFORE UPDATE OF asset ON settlements
WHEN NEW.asset IS NOT NULL AND NEW.asset NOT IN (
    'USDT', 'USDC')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: settlements.asset is not a known code');
END;
