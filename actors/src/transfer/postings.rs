//! The transfer's own ledger entries (decisions §6, §7), per currency. The
//! legs book theirs as settlements do: leg 1's charge credits transfer
//! clearing in the send currency, leg 2 holds the asset on transfer
//! clearing and posts it to the custodian. Between the two, the conversion
//! takes the fees out of the collected fiat and turns the rest into the
//! asset through the conversion accounts, so each currency balances alone.

use tern_schema::ledger::{self, Direction, Entry, Line, Phase, SystemAccount};
use tern_schema::models::TransferRow;
use tern_schema::money::MinorUnits;
use tern_schema::plan::{LedgerWrite, Plan};

/// The lines of the conversion: collected fiat out of clearing, into the
/// platform fee, the network fee and the conversion desk; the asset out of
/// the conversion desk into clearing, for leg 2.
pub fn conversion_lines(row: &TransferRow) -> Vec<Line> {
    let fiat = row.send_currency.as_str();
    let asset = row.receive_asset.as_str();
    // The quote priced what is left after the fees as positive; a row that
    // says otherwise makes a line the ledger refuses, never a wrapped one.
    let converted = row
        .send_amount_minor
        .saturating_sub(row.platform_fee_minor)
        .saturating_sub(row.network_fee_minor);
    let line = |account: SystemAccount, currency: &str, direction, amount_minor| Line {
        account_id: account.account_id(currency),
        direction,
        amount_minor,
        currency: currency.to_owned(),
    };
    let candidates = [
        line(
            SystemAccount::TransferClearing,
            fiat,
            Direction::Debit,
            row.send_amount_minor,
        ),
        line(
            SystemAccount::PlatformFees,
            fiat,
            Direction::Credit,
            row.platform_fee_minor,
        ),
        line(
            SystemAccount::NetworkFees,
            fiat,
            Direction::Credit,
            row.network_fee_minor,
        ),
        line(
            SystemAccount::Conversion,
            fiat,
            Direction::Credit,
            converted,
        ),
        line(
            SystemAccount::Conversion,
            asset,
            Direction::Debit,
            row.receive_amount_minor,
        ),
        line(
            SystemAccount::TransferClearing,
            asset,
            Direction::Credit,
            row.receive_amount_minor,
        ),
    ];
    // A zero fee is no movement; the ledger refuses zero lines.
    candidates
        .into_iter()
        .filter(|line| line.amount_minor != MinorUnits::ZERO)
        .collect()
}

fn opposite(direction: Direction) -> Direction {
    match direction {
        Direction::Debit => Direction::Credit,
        Direction::Credit => Direction::Debit,
    }
}

/// Books the conversion; answers its ledger transaction id.
pub fn convert(plan: &mut Plan, row: &TransferRow) -> String {
    let entry = Entry {
        merchant_id: Some(row.merchant_id.clone()),
        settlement_key: Some(row.leg1_key.clone()),
        description: format!("transfer {} converted", row.id),
        lines: conversion_lines(row),
    };
    record(plan, entry)
}

/// Undoes the conversion with the opposite entry (entries are never
/// edited), so the collected fiat is back in clearing for the refund.
pub fn unconvert(plan: &mut Plan, row: &TransferRow) -> String {
    let lines = conversion_lines(row)
        .into_iter()
        .map(|line| Line {
            direction: opposite(line.direction),
            ..line
        })
        .collect();
    let entry = Entry {
        merchant_id: Some(row.merchant_id.clone()),
        settlement_key: Some(row.leg1_key.clone()),
        description: format!("transfer {} conversion undone", row.id),
        lines,
    };
    record(plan, entry)
}

/// Plans `entry`, posted at once; answers its id.
fn record(plan: &mut Plan, entry: Entry) -> String {
    let id = ledger::new_transaction_id();
    plan.ledger.push(LedgerWrite::Record {
        id: id.clone(),
        entry,
        phase: Phase::Posted,
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_schema::ledger::check_balanced;

    #[test]
    fn the_conversion_balances_per_currency_and_skips_zero_fees() {
        let mut row = crate::transfer::record::tests::row();
        let lines = conversion_lines(&row);
        assert_eq!(lines.len(), 6);
        check_balanced(&lines).expect("balanced");
        let fiat_out: i64 = lines
            .iter()
            .filter(|l| l.currency == "EUR" && l.direction == Direction::Credit)
            .map(|l| l.amount_minor.get())
            .sum();
        assert_eq!(fiat_out, row.send_amount_minor.get());

        row.network_fee_minor = MinorUnits::ZERO;
        let lines = conversion_lines(&row);
        assert_eq!(lines.len(), 5);
        check_balanced(&lines).expect("balanced without a network fee");
    }
}
