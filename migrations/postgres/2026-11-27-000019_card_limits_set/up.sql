-- Which amount limits of a card its merchant set (decisions §10): their
-- column names, comma-separated. The others follow the program's defaults,
-- fitted between the merchant's values; only the merchant's values must be
-- in order, so a program default never makes a PATCH fail.
ALTER TABLE cards ADD COLUMN limits_set TEXT NOT NULL DEFAULT '';

-- Existing cards: a value other than the program default (500000, 1000000,
-- 5000000, 50000 for every program and type) can only have come from the
-- merchant. One equal to the default is taken as the default, which it is
-- in effect until the merchant sets another limit.
UPDATE cards SET limits_set =
    CASE WHEN per_transaction_minor IS NULL OR per_transaction_minor <> 500000
        THEN 'per_transaction_minor,' ELSE '' END
    || CASE WHEN daily_spend_minor IS NULL OR daily_spend_minor <> 1000000
        THEN 'daily_spend_minor,' ELSE '' END
    || CASE WHEN monthly_spend_minor IS NULL OR monthly_spend_minor <> 5000000
        THEN 'monthly_spend_minor,' ELSE '' END
    || CASE WHEN atm_daily_minor IS NULL OR atm_daily_minor <> 50000
        THEN 'atm_daily_minor,' ELSE '' END;
