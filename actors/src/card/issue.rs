//! Issuing a card: the intent written at creation (or by a replacement) is
//! issued, resumed when its outcome is unknown, or abandoned when the
//! issuer did not issue it, putting back the card it was to replace.

use chrono::NaiveDateTime;
use serde_json::json;
use tern_schema::audit::AuditRecord;
use tern_schema::models::CardRow;
use tern_schema::plan::RowWrite;
use tern_schema::store::cards as store;
use tern_schema::types::utc_now;
use tern_schema::vocabulary::{CardId, WalletStatus};
use tern_schema::Db;

use super::kind::{CardContext, CardKind, CardState};
use super::machine::{self, Effect, Event, Operation, Status};
use super::messages::{CardFailure, CardReply, Origin};
use super::record::record;
use super::write::{
    answer, commit, commit_step, decided, is_unique_violation, rejected, runtime_error, unexpected,
    Step,
};
use crate::ports::{CardIssuer, IssueRequest, IssuedCard, IssuerStatus};
use crate::runtime::timers;
use crate::runtime::version::next_version;
use crate::runtime::{
    self, EntityEnv, EntityKind, RuntimeError, StepError, TimerFiring, TimerSpec, Versioned,
    VersionedRow,
};

/// Payload of the timer that resumes an issue whose outcome is unknown.
pub(super) const TIMER_RESUME_ISSUE: &str = "resume_issue";
/// How long an issue with an unknown outcome waits before asking again.
pub const ISSUE_RESUME_DELAY: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

/// What asking the issuer for a card came to.
enum IssueOutcome {
    Issued(IssuedCard),
    /// The issuer did not issue it; safe to abandon the intent.
    NotIssued(String),
    /// Nobody knows yet; ask again later under the same key.
    Unknown(String),
}

async fn ask_issuer(issuer: &dyn CardIssuer, row: &CardRow) -> IssueOutcome {
    let network = row.network;
    let request = IssueRequest {
        idempotency_key: row.id.to_string(),
        card_id: row.id.clone(),
        user_id: row.user_id.clone(),
        program_id: row.program_id.clone(),
        network,
        card_type: row.card_type,
        currency: row.currency.clone(),
        cardholder: row.cardholder.clone(),
    };
    let error = match issuer.issue(&request).await {
        Ok(issued) => return IssueOutcome::Issued(issued),
        Err(error) => error,
    };
    if !error.needs_inquiry() {
        return IssueOutcome::NotIssued(error.to_string());
    }
    match issuer.find_issued(row.id.as_str()).await {
        Ok(Some(issued)) => IssueOutcome::Issued(issued),
        Ok(None) => IssueOutcome::NotIssued(error.to_string()),
        Err(inquiry) => IssueOutcome::Unknown(format!("{error}; then {inquiry}")),
    }
}

impl IssueOutcome {
    /// The outcome as the machine hears it.
    fn event(&self) -> Event {
        match self {
            IssueOutcome::Issued(_) => Event::Issued,
            IssueOutcome::NotIssued(_) => Event::NotIssued,
            IssueOutcome::Unknown(_) => Event::IssueUnknown,
        }
    }

    /// What the card answers when it was not issued (yet).
    fn failure(&self) -> Option<CardFailure> {
        match self {
            IssueOutcome::Issued(_) => None,
            IssueOutcome::NotIssued(reason) | IssueOutcome::Unknown(reason) => {
                Some(CardFailure::Issuer(reason.clone()))
            }
        }
    }
}

/// Issues the card its intent describes, or abandons the intent when the
/// issuer did not issue it, putting back the card it was to replace.
pub(super) async fn issue(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    origin: Origin,
    firing: Option<TimerFiring>,
) -> Step {
    let asks = match decided(&state, Event::Issue) {
        Ok((_, effects)) => effects.contains(&Effect::AskIssuer),
        Err(refused) => return rejected(state, refused),
    };
    if !asks {
        if let Some(firing) = firing {
            timers::complete(&env.db, firing).await?;
        }
        let row = state.row.clone();
        return answer(state, Ok(CardReply::Card(Box::new(row))));
    }
    let outcome = ask_issuer(env.ctx.issuer.as_ref(), &state.row).await;
    let effects = match decided(&state, outcome.event()) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&state.row, state.row.clone(), firing.as_ref());
    let booked = book_outcome(
        &env.db, &state.row, &outcome, effects, &origin, &mut step, "issue",
    )
    .await?;
    let row = written(&env.db, &state.row, step, booked.persist)
        .await
        .map_err(runtime_error)?;
    if booked.block_replaced {
        if let Some(old) = row.replaces_card_id.clone() {
            block_replaced_at_issuer(env, &old).await;
        }
    }
    state.gone = booked.abandoned.is_some();
    if let Some(failure) = outcome.failure() {
        return answer(state, Err(failure));
    }
    state.row = row.clone();
    answer(state, Ok(CardReply::Card(Box::new(row))))
}

/// What an issue's outcome wrote into its intent's step.
struct Booked {
    /// The step's row is the issued card.
    persist: bool,
    /// The card this one replaces is to be blocked at the issuer.
    block_replaced: bool,
    /// The intent is dropped, with the card it was to replace given its
    /// status back (when there is one).
    abandoned: Option<Option<CardRow>>,
}

/// Books the effects of an issue's outcome into its intent's step: the
/// same for a card's own issue and a replacement issued from the card it
/// replaces.
async fn book_outcome(
    db: &Db,
    intent: &CardRow,
    outcome: &IssueOutcome,
    effects: Vec<Effect>,
    origin: &Origin,
    step: &mut runtime::Step<CardRow>,
    command: &str,
) -> Result<Booked, RuntimeError> {
    let mut booked = Booked {
        persist: false,
        block_replaced: false,
        abandoned: None,
    };
    for effect in effects {
        match (effect, outcome) {
            (Effect::Persist, IssueOutcome::Issued(issued)) => {
                step.next = issued_row(step.next.clone(), issued);
                booked.persist = true;
            }
            (Effect::Audit(action), _) => {
                let row = if booked.persist { &step.next } else { intent };
                step.plan.audit.push(issued_record(row, origin, action));
            }
            (Effect::BlockReplaced, _) => booked.block_replaced = true,
            (Effect::Abandon, IssueOutcome::NotIssued(reason)) => {
                tracing::warn!(card = %intent.id, %reason, "issuer did not issue the card; intent abandoned");
                let (rows, restored) = abandonment(db, intent).await.map_err(runtime_error)?;
                step.plan.rows.extend(rows);
                booked.abandoned = Some(restored);
            }
            // The card's own actor asks again (the timer, or recovery).
            (Effect::ScheduleResume, IssueOutcome::Unknown(reason)) => {
                tracing::warn!(card = %intent.id, %reason, "issue outcome unknown; asking again later");
                step.plan.timers.push(resume_timer(&intent.id));
            }
            (other, _) => return Err(unexpected(&other, command)),
        }
    }
    Ok(booked)
}

fn issued_record(row: &CardRow, origin: &Origin, action: &'static str) -> AuditRecord {
    record(
        row,
        origin,
        action,
        json!({"program_id": row.program_id, "network": row.network,
               "last_four": row.last_four, "replaces": row.replaces_card_id}),
    )
}

/// Asks the card's actor to finish an issue whose outcome is unknown, later
/// and across restarts: the timer commits with the transition that wants it.
fn resume_timer(card_id: &CardId) -> tern_schema::store::timers::TimerRow {
    let timer_id = format!("{card_id}:resume:{}", uuid::Uuid::now_v7().simple());
    TimerSpec {
        id: &timer_id,
        kind: CardKind::NAME,
        entity_id: card_id.as_str(),
        due_at: utc_now() + ISSUE_RESUME_DELAY,
        payload: TIMER_RESUME_ISSUE,
    }
    .row()
}

/// The intent's step written: the issued card when the machine persisted
/// it, else the step's other writes only (a timer, or the intent dropped),
/// leaving the intent's row as `intent` is.
async fn written(
    db: &Db,
    intent: &CardRow,
    step: runtime::Step<CardRow>,
    persist: bool,
) -> Result<CardRow, StepError> {
    if persist {
        return commit_step(db, step).await;
    }
    commit(db, &intent.id, step.plan).await?;
    Ok(intent.clone())
}

/// The intent's next row (already at its next version) once issued.
fn issued_row(next: CardRow, issued: &IssuedCard) -> CardRow {
    CardRow {
        status: Status::Active,
        provider_card_id: Some(issued.provider_card_id.clone()),
        last_four: Some(issued.last_four.clone()),
        expiry_month: Some(issued.expiry_month),
        expiry_year: Some(issued.expiry_year),
        ..next
    }
}

/// The writes that remove an intent the issuer never acted on and, for a
/// replacement, give the old card back its status (returned too).
async fn abandonment(
    db: &Db,
    intent: &CardRow,
) -> Result<(Vec<RowWrite>, Option<CardRow>), StepError> {
    let mut rows = vec![RowWrite::IssuingCardDropped {
        card_id: intent.id.clone(),
    }];
    let (Some(old_id), Some(old_status)) = (&intent.replaces_card_id, &intent.replaces_status)
    else {
        return Ok((rows, None));
    };
    let old = {
        let mut pooled = db.get().await?;
        let found = store::find(&mut pooled.tx(), old_id).await?;
        found
    };
    let Some(old) = old else {
        return Ok((rows, None));
    };
    if old.replaced_by_card_id.as_ref() != Some(&intent.id) {
        return Ok((rows, None));
    }
    // Not a step's move: the old card turns live again only once the
    // intent is dropped (one live virtual card per user), so it is written
    // after it, in the plan's rows.
    let mut restored = CardRow {
        status: *old_status,
        replaced_by_card_id: None,
        ..old.clone()
    };
    restored.stamp(next_version(old.version), utc_now());
    rows.push(RowWrite::Card {
        row: restored.clone(),
        expected_version: old.version,
    });
    Ok((rows, Some(restored)))
}

/// Tells the issuer a replaced card is blocked. Tern already declines it
/// (the card's status decides), so a failure here is logged, not fatal.
async fn block_replaced_at_issuer(env: &EntityEnv<CardContext>, old_id: &CardId) {
    let provider_card_id = match env.db.get().await {
        Ok(mut pooled) => match store::find(&mut pooled.tx(), old_id).await {
            Ok(row) => row.and_then(|row| row.provider_card_id),
            Err(error) => {
                tracing::warn!(card = %old_id, %error, "could not read the replaced card");
                None
            }
        },
        Err(error) => {
            tracing::warn!(card = %old_id, %error, "could not read the replaced card");
            None
        }
    };
    if let Some(provider_card_id) = provider_card_id {
        if let Err(error) = env
            .ctx
            .issuer
            .set_status(&provider_card_id, IssuerStatus::Blocked)
            .await
        {
            tracing::warn!(card = %old_id, %error, "issuer not told the replaced card is blocked");
        }
    }
}

pub(super) async fn replace(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    reason: Option<String>,
    new_card_id: CardId,
    origin: Origin,
) -> Step {
    let (next, effects) = match decided(&state, Event::Operate(Operation::Replace)) {
        Ok(decided) => decided,
        Err(refused) => return rejected(state, refused),
    };
    let old = state.row.clone();
    // The machine replaces a card only by blocking it (`Effect::Persist`).
    let mut step = runtime::Step::begin(&old, old.clone(), None);
    step.next.replaced_by_card_id = Some(new_card_id.clone());
    let now = step.next.updated_at;
    let mut replacement = None;
    for effect in effects {
        match effect {
            Effect::Persist => step.next.status = next.status,
            Effect::Audit(action) => step.plan.audit.push(record(
                &old,
                &origin,
                action,
                json!({"new_card_id": new_card_id, "reason": reason, "from": old.status}),
            )),
            Effect::IssueReplacement => {
                let intent = intent_replacing(&old, &new_card_id, &origin, now);
                step.plan.rows.push(RowWrite::NewCard(intent.clone()));
                replacement = Some(intent);
            }
            other => return Err(unexpected(&other, "replace")),
        }
    }
    let Some(intent) = replacement else {
        return Err(unexpected(
            &Effect::Persist,
            "replace without a replacement",
        ));
    };
    let blocked = match commit_step(&env.db, step).await {
        Ok(blocked) => blocked,
        Err(error) if is_unique_violation(&error) => {
            return answer(state, Err(CardFailure::LiveCardExists));
        }
        Err(error) => return Err(runtime_error(error)),
    };
    state.row = blocked;
    issue_replacement(env, state, intent, &origin).await
}

/// The new card's intent: the old card's program, currency, name and
/// limits, to be issued in its place.
fn intent_replacing(
    old: &CardRow,
    new_card_id: &CardId,
    origin: &Origin,
    now: NaiveDateTime,
) -> CardRow {
    CardRow {
        id: new_card_id.to_owned(),
        status: Status::Issuing,
        provider_card_id: None,
        last_four: None,
        expiry_month: None,
        expiry_year: None,
        wallet_status: WalletStatus::None,
        replaces_card_id: Some(old.id.clone()),
        replaces_status: Some(old.status),
        replaced_by_card_id: None,
        request_id: origin.request_id.clone(),
        version: Versioned::<()>::INITIAL,
        created_at: now,
        updated_at: now,
        closed_at: None,
        ..old.clone()
    }
}

/// Issues a replacement's intent from the replaced card's actor, which
/// answers the new card: the new card's machine decides what its outcome
/// does.
async fn issue_replacement(
    env: &EntityEnv<CardContext>,
    mut state: CardState,
    intent: CardRow,
    origin: &Origin,
) -> Step {
    let new_card = machine::State {
        status: Status::Issuing,
        currency: intent.currency.clone(),
        limits: intent.limits,
        spend: machine::Spend::empty(intent.created_at),
        replacing: true,
    };
    let outcome = ask_issuer(env.ctx.issuer.as_ref(), &intent).await;
    let effects = match machine::transition(&new_card, outcome.event()) {
        Ok((_, effects)) => effects,
        Err(refused) => return rejected(state, refused),
    };
    let mut step = runtime::Step::begin(&intent, intent.clone(), None);
    let booked = book_outcome(
        &env.db, &intent, &outcome, effects, origin, &mut step, "replace",
    )
    .await?;
    // The version a write can lose: the new card's, or this one's when the
    // intent is abandoned and this card gets its status back.
    let guarded = match booked.abandoned {
        Some(_) => &state.row,
        None => &intent,
    };
    let row = match written(&env.db, guarded, step, booked.persist).await {
        Ok(_) if !booked.persist => intent,
        Ok(row) => row,
        Err(error) => return Err(runtime_error(error)),
    };
    if booked.block_replaced {
        block_replaced_at_issuer(env, &state.row.id).await;
    }
    if let Some(Some(restored)) = booked.abandoned {
        state.row = restored;
    }
    match outcome.failure() {
        Some(failure) => answer(state, Err(failure)),
        None => answer(state, Ok(CardReply::Card(Box::new(row)))),
    }
}
