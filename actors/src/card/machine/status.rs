//! The card status table: which operation a card in a given status
//! accepts (the interface's card status table plus decisions §10).

pub use tern_schema::vocabulary::CardStatus as Status;

/// What a caller asks of an issued card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Freeze,
    Unfreeze,
    Close,
    /// Block this card and issue a new one in its place.
    Replace,
    /// Display name or limits.
    Update,
    RevealDetails,
    ProvisionWallet,
}

impl Operation {
    pub const ALL: [Operation; 7] = [
        Operation::Freeze,
        Operation::Unfreeze,
        Operation::Close,
        Operation::Replace,
        Operation::Update,
        Operation::RevealDetails,
        Operation::ProvisionWallet,
    ];
}

/// Why a card refused an operation; each is a 409 with its `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    AlreadyFrozen,
    NotFrozen,
    /// A closed card accepts nothing but reads (decisions §10).
    Closed,
    /// A replaced (blocked) card cannot be frozen or get a wallet token.
    Blocked,
    /// Still being issued: nothing can be asked of it yet.
    NotIssued,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::AlreadyFrozen => "CARD_ALREADY_FROZEN",
            Refusal::NotFrozen => "CARD_NOT_FROZEN",
            Refusal::Closed => "CARD_CLOSED",
            Refusal::Blocked => "CARD_BLOCKED",
            Refusal::NotIssued => "CARD_NOT_ISSUED",
        }
    }

    pub fn detail(self) -> &'static str {
        match self {
            Refusal::AlreadyFrozen => "the card is already frozen",
            Refusal::NotFrozen => "the card is not frozen",
            Refusal::Closed => "the card is closed; it accepts no change",
            Refusal::Blocked => "the card is blocked (replaced)",
            Refusal::NotIssued => "the card is still being issued",
        }
    }
}

/// What an accepted operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The card's status afterwards.
    pub next: Status,
    /// False when the operation finds the card already where it asks (a
    /// repeated close): nothing is written or audited again.
    pub changes: bool,
}

/// The card status table. Replace answers the old card's next status; the
/// new card is issued separately.
pub fn apply(status: Status, operation: Operation) -> Result<Accepted, Refusal> {
    use Operation as O;
    use Status as S;
    let moved = |next| {
        Ok(Accepted {
            next,
            changes: true,
        })
    };
    let stays = |changes| {
        Ok(Accepted {
            next: status,
            changes,
        })
    };
    match (status, operation) {
        (S::Issuing, _) => Err(Refusal::NotIssued),
        (S::Closed, O::Close) => stays(false),
        (S::Closed, _) => Err(Refusal::Closed),
        (_, O::Close) => moved(S::Closed),
        (S::Active, O::Freeze) => moved(S::Frozen),
        (S::Frozen, O::Freeze) => Err(Refusal::AlreadyFrozen),
        (S::Blocked, O::Freeze) => Err(Refusal::Blocked),
        (S::Frozen, O::Unfreeze) => moved(S::Active),
        (S::Active | S::Blocked, O::Unfreeze) => Err(Refusal::NotFrozen),
        (S::Active | S::Frozen | S::Blocked, O::Replace) => moved(S::Blocked),
        (S::Active | S::Frozen | S::Blocked, O::Update) => stays(true),
        (S::Active | S::Frozen | S::Blocked, O::RevealDetails) => stays(false),
        (S::Blocked, O::ProvisionWallet) => Err(Refusal::Blocked),
        (S::Active | S::Frozen, O::ProvisionWallet) => stays(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Operation as O;
    use Status as S;

    /// The interface's card status table, decisions §10, and the moves it
    /// leaves open, one row per (status, operation).
    #[test]
    fn every_status_and_operation_has_its_row() {
        let ok = |next, changes| Ok(Accepted { next, changes });
        let table: [(Status, Operation, Result<Accepted, Refusal>); 35] = [
            (S::Issuing, O::Freeze, Err(Refusal::NotIssued)),
            (S::Issuing, O::Unfreeze, Err(Refusal::NotIssued)),
            (S::Issuing, O::Close, Err(Refusal::NotIssued)),
            (S::Issuing, O::Replace, Err(Refusal::NotIssued)),
            (S::Issuing, O::Update, Err(Refusal::NotIssued)),
            (S::Issuing, O::RevealDetails, Err(Refusal::NotIssued)),
            (S::Issuing, O::ProvisionWallet, Err(Refusal::NotIssued)),
            (S::Active, O::Freeze, ok(S::Frozen, true)),
            (S::Active, O::Unfreeze, Err(Refusal::NotFrozen)),
            (S::Active, O::Close, ok(S::Closed, true)),
            (S::Active, O::Replace, ok(S::Blocked, true)),
            (S::Active, O::Update, ok(S::Active, true)),
            (S::Active, O::RevealDetails, ok(S::Active, false)),
            (S::Active, O::ProvisionWallet, ok(S::Active, true)),
            (S::Frozen, O::Freeze, Err(Refusal::AlreadyFrozen)),
            (S::Frozen, O::Unfreeze, ok(S::Active, true)),
            (S::Frozen, O::Close, ok(S::Closed, true)),
            (S::Frozen, O::Replace, ok(S::Blocked, true)),
            (S::Frozen, O::Update, ok(S::Frozen, true)),
            (S::Frozen, O::RevealDetails, ok(S::Frozen, false)),
            (S::Frozen, O::ProvisionWallet, ok(S::Frozen, true)),
            (S::Blocked, O::Freeze, Err(Refusal::Blocked)),
            (S::Blocked, O::Unfreeze, Err(Refusal::NotFrozen)),
            (S::Blocked, O::Close, ok(S::Closed, true)),
            (S::Blocked, O::Replace, ok(S::Blocked, true)),
            (S::Blocked, O::Update, ok(S::Blocked, true)),
            (S::Blocked, O::RevealDetails, ok(S::Blocked, false)),
            (S::Blocked, O::ProvisionWallet, Err(Refusal::Blocked)),
            (S::Closed, O::Freeze, Err(Refusal::Closed)),
            (S::Closed, O::Unfreeze, Err(Refusal::Closed)),
            (S::Closed, O::Close, ok(S::Closed, false)),
            (S::Closed, O::Replace, Err(Refusal::Closed)),
            (S::Closed, O::Update, Err(Refusal::Closed)),
            (S::Closed, O::RevealDetails, Err(Refusal::Closed)),
            (S::Closed, O::ProvisionWallet, Err(Refusal::Closed)),
        ];
        for (status, operation, expected) in table {
            assert_eq!(
                apply(status, operation),
                expected,
                "{status:?} {operation:?}"
            );
        }
        // The table covers every pair exactly once.
        for status in Status::ALL {
            for operation in Operation::ALL {
                assert_eq!(
                    table
                        .iter()
                        .filter(|(s, o, _)| *s == status && *o == operation)
                        .count(),
                    1,
                    "{status:?} {operation:?}"
                );
            }
        }
    }

    #[test]
    fn refusal_codes_are_the_interfaces() {
        assert_eq!(Refusal::AlreadyFrozen.code(), "CARD_ALREADY_FROZEN");
        assert_eq!(Refusal::NotFrozen.code(), "CARD_NOT_FROZEN");
        assert_eq!(Refusal::Closed.code(), "CARD_CLOSED");
    }
}
