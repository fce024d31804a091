DROP INDEX settlements_by_merchant;
CREATE INDEX settlements_by_merchant ON settlements (merchant_id, created_at);
