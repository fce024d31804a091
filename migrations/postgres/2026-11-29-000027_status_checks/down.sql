ALTER TABLE settlements DROP CONSTRAINT settlements_asset_code;
ALTER TABLE card_transactions DROP CONSTRAINT card_transactions_decline_reason_code;
ALTER TABLE cards DROP CONSTRAINT cards_replaces_status_code;
ALTER TABLE cards DROP CONSTRAINT cards_wallet_status_code;
