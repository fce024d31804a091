//! Several Tern nodes on one PostgreSQL: who is alive, and which node owns
//! which slot of entities.
//!
//! Entities hash into [`SLOTS`] slots. A node heartbeats its row in
//! `cluster_nodes`; one whose lease (its last heartbeat plus its own TTL)
//! has passed is dead.
//! A slot is owned by one node at a time: claiming it (only from no owner or
//! a dead one, compared on the epoch it was seen at) and releasing it each
//! raise its epoch, so `(slot, epoch)` names one ownership, and a plan
//! fenced by an epoch that is no longer the slot's writes nothing (see
//! [`crate::plan::Fence`]). Leases are renewed by the heartbeat alone: one
//! row per node per beat, whatever the number of entities.
//!
//! Times are the database's (`now()` in UTC), so nodes' clocks never
//! decide who is alive. PostgreSQL only: SQLite runs one process, which owns
//! everything without asking.

use chrono::NaiveDateTime;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text, Timestamp};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;

use crate::db::Conn;
use crate::{StoreError, StoreResult, Tx};

/// Slots entities hash into: enough to spread over a handful of nodes
/// evenly, few enough that a node renews all of its own with one row.
pub const SLOTS: i32 = 64;

/// A node as the database knows it.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName, Serialize)]
pub struct NodeRow {
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = Nullable<Text>)]
    pub advertise_url: Option<String>,
    #[diesel(sql_type = Timestamp)]
    pub started_at: NaiveDateTime,
    #[diesel(sql_type = Timestamp)]
    pub heartbeat_at: NaiveDateTime,
    /// Whether its lease (last heartbeat plus its own TTL) runs.
    #[diesel(sql_type = Bool)]
    pub live: bool,
    /// Slots it owns.
    #[diesel(sql_type = BigInt)]
    pub slots: i64,
}

/// A slot's owner and epoch.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct SlotRow {
    #[diesel(sql_type = Integer)]
    pub slot: i32,
    #[diesel(sql_type = Nullable<Text>)]
    pub owner: Option<String>,
    #[diesel(sql_type = BigInt)]
    pub epoch: i64,
}

#[derive(QueryableByName)]
struct Claimed {
    #[diesel(sql_type = Integer)]
    slot: i32,
    #[diesel(sql_type = BigInt)]
    epoch: i64,
}

const NOW: &str = "(now() AT TIME ZONE 'UTC')";

/// The PostgreSQL connection of `tx`; the cluster has no SQLite form.
async fn pg<'c>(tx: &mut Tx<'c>) -> StoreResult<&'c AsyncPgConnection> {
    match tx.conn().await? {
        Conn::Pg(conn) => Ok(*conn),
        Conn::Sqlite(_) => Err(StoreError::Unavailable(
            "several nodes need PostgreSQL; SQLite runs one process".into(),
        )),
    }
}

/// Registers the node or renews its heartbeat, alive until `lease_ttl_ms`
/// from now. Answers `false`, writing nothing, when another live process
/// (another `instance`) heartbeats under the same id: two processes with
/// one name would take each other's slots on every beat.
pub async fn heartbeat(
    tx: &mut Tx<'_>,
    node_id: &str,
    instance: &str,
    advertise_url: Option<&str>,
    lease_ttl_ms: i64,
) -> StoreResult<bool> {
    let mut conn = pg(tx).await?;
    let renewed = diesel::sql_query(format!(
        "INSERT INTO cluster_nodes (id, advertise_url, instance, started_at, heartbeat_at, lease_until) \
         VALUES ($1, $2, $3, {NOW}, {NOW}, {NOW} + ($4 * interval '1 millisecond')) \
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = {NOW}, \
           lease_until = {NOW} + ($4 * interval '1 millisecond'), \
           advertise_url = EXCLUDED.advertise_url, instance = EXCLUDED.instance, \
           started_at = CASE WHEN cluster_nodes.instance = EXCLUDED.instance \
             THEN cluster_nodes.started_at ELSE {NOW} END \
         WHERE cluster_nodes.instance = EXCLUDED.instance OR cluster_nodes.lease_until < {NOW}"
    ))
    .bind::<Text, _>(node_id)
    .bind::<Nullable<Text>, _>(advertise_url)
    .bind::<Text, _>(instance)
    .bind::<BigInt, _>(lease_ttl_ms)
    .execute(&mut conn)
    .await?;
    Ok(renewed == 1)
}

/// Every registered node, live or not (alive until its own lease end),
/// with the slots it owns.
pub async fn nodes(tx: &mut Tx<'_>) -> StoreResult<Vec<NodeRow>> {
    let mut conn = pg(tx).await?;
    let rows = diesel::sql_query(format!(
        "SELECT n.id, n.advertise_url, n.started_at, n.heartbeat_at, \
           n.lease_until > {NOW} AS live, \
           (SELECT count(*) FROM cluster_slots s WHERE s.owner = n.id) AS slots \
         FROM cluster_nodes n ORDER BY n.id"
    ))
    .load(&mut conn)
    .await?;
    Ok(rows)
}

/// Every slot's owner and epoch, in slot order.
pub async fn slots(tx: &mut Tx<'_>) -> StoreResult<Vec<SlotRow>> {
    let mut conn = pg(tx).await?;
    let rows = diesel::sql_query("SELECT slot, owner, epoch FROM cluster_slots ORDER BY slot")
        .load(&mut conn)
        .await?;
    Ok(rows)
}

/// Claims each `(slot, epoch)` still at the epoch it was seen at (so a
/// slot another node claimed or released meanwhile is left alone); answers
/// the slots won, with their new epochs. The caller decides a slot is free
/// (no owner, or a dead one) from what it read. Rows are locked in slot
/// order, and a slot whose row a batch holds (`FOR SHARE`, a former
/// owner's commit in flight, or stalled) is skipped this time instead of
/// waited for: a heartbeat never hangs on another node.
pub async fn claim(
    tx: &mut Tx<'_>,
    node_id: &str,
    seen: &[(i32, i64)],
) -> StoreResult<Vec<(i32, i64)>> {
    if seen.is_empty() {
        return Ok(Vec::new());
    }
    let (slots, epochs): (Vec<i32>, Vec<i64>) = seen.iter().copied().unzip();
    let mut conn = pg(tx).await?;
    let won: Vec<Claimed> = diesel::sql_query(format!(
        "WITH c AS (SELECT * FROM unnest($2::int[], $3::bigint[]) AS c (slot, epoch)), \
         free AS (SELECT s.slot FROM cluster_slots s JOIN c ON s.slot = c.slot AND s.epoch = c.epoch \
           ORDER BY s.slot FOR UPDATE OF s SKIP LOCKED) \
         UPDATE cluster_slots AS s SET owner = $1, epoch = s.epoch + 1, acquired_at = {NOW} \
         FROM free WHERE s.slot = free.slot \
         RETURNING s.slot, s.epoch"
    ))
    .bind::<Text, _>(node_id)
    .bind::<Array<Integer>, _>(&slots)
    .bind::<Array<BigInt>, _>(&epochs)
    .load(&mut conn)
    .await?;
    Ok(won.into_iter().map(|c| (c.slot, c.epoch)).collect())
}

/// Gives up each `(slot, epoch)` the node still owns at that epoch;
/// answers the slots released (a slot a batch holds is skipped, and
/// released at a later beat). The epoch rises, so nothing the node still
/// has in flight for them can be written.
pub async fn release(
    tx: &mut Tx<'_>,
    node_id: &str,
    owned: &[(i32, i64)],
) -> StoreResult<Vec<i32>> {
    if owned.is_empty() {
        return Ok(Vec::new());
    }
    let (slots, epochs): (Vec<i32>, Vec<i64>) = owned.iter().copied().unzip();
    let mut conn = pg(tx).await?;
    let released: Vec<Claimed> = diesel::sql_query(
        "WITH c AS (SELECT * FROM unnest($2::int[], $3::bigint[]) AS c (slot, epoch)), \
         held AS (SELECT s.slot FROM cluster_slots s JOIN c ON s.slot = c.slot AND s.epoch = c.epoch \
           WHERE s.owner = $1 ORDER BY s.slot FOR UPDATE OF s SKIP LOCKED) \
         UPDATE cluster_slots AS s SET owner = NULL, epoch = s.epoch + 1, acquired_at = NULL \
         FROM held WHERE s.slot = held.slot \
         RETURNING s.slot, s.epoch",
    )
    .bind::<Text, _>(node_id)
    .bind::<Array<Integer>, _>(&slots)
    .bind::<Array<BigInt>, _>(&epochs)
    .load(&mut conn)
    .await?;
    Ok(released.into_iter().map(|c| c.slot).collect())
}

/// Frees the timer claims in `slots`, which a node just took over: the
/// former owner's claims would otherwise hold them for their whole lease,
/// and nothing it still does for them can be written.
pub async fn free_timer_claims(tx: &mut Tx<'_>, slots: &[i32]) -> StoreResult<usize> {
    if slots.is_empty() {
        return Ok(0);
    }
    let mut conn = pg(tx).await?;
    let freed = diesel::sql_query(
        "UPDATE actor_timers SET claim_token = NULL, claimed_until = NULL \
         WHERE slot = ANY($1) AND claim_token IS NOT NULL",
    )
    .bind::<Array<Integer>, _>(slots)
    .execute(&mut conn)
    .await?;
    Ok(freed)
}

/// Forgets nodes silent for longer than `silent_ms` that own nothing, so
/// the list an operator reads stays about the cluster that runs.
pub async fn forget_silent(tx: &mut Tx<'_>, silent_ms: i64) -> StoreResult<usize> {
    let mut conn = pg(tx).await?;
    let forgotten = diesel::sql_query(format!(
        "DELETE FROM cluster_nodes n WHERE n.heartbeat_at < {NOW} - ($1 * interval '1 millisecond') \
         AND NOT EXISTS (SELECT 1 FROM cluster_slots s WHERE s.owner = n.id)"
    ))
    .bind::<BigInt, _>(silent_ms)
    .execute(&mut conn)
    .await?;
    Ok(forgotten)
}

/// An entity placed by another key than its id (`cluster_routes`).
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct PinnedRoute {
    #[diesel(sql_type = Text)]
    pub kind: String,
    #[diesel(sql_type = Text)]
    pub entity_id: String,
    #[diesel(sql_type = Text)]
    pub route_key: String,
}

/// Routes pinned per statement: bounded binds, whatever the set's size.
const PINS_PER_STATEMENT: usize = 1_000;

/// Pins each `(entity_id, route_key)` of `kind` unless the entity has a
/// route already: a route, once pinned, never changes, so nodes that read
/// the routes at different times agree.
pub async fn pin_routes(
    tx: &mut Tx<'_>,
    kind: &str,
    routes: &[(String, String)],
) -> StoreResult<usize> {
    let mut conn = pg(tx).await?;
    let mut pinned = 0;
    for chunk in routes.chunks(PINS_PER_STATEMENT) {
        let (ids, keys): (Vec<&str>, Vec<&str>) = chunk
            .iter()
            .map(|(id, key)| (id.as_str(), key.as_str()))
            .unzip();
        pinned += diesel::sql_query(
            "INSERT INTO cluster_routes (kind, entity_id, route_key) \
             SELECT $1, r.entity_id, r.route_key FROM unnest($2::text[], $3::text[]) AS r (entity_id, route_key) \
             ON CONFLICT (kind, entity_id) DO NOTHING",
        )
        .bind::<Text, _>(kind)
        .bind::<Array<Text>, _>(&ids)
        .bind::<Array<Text>, _>(&keys)
        .execute(&mut conn)
        .await?;
    }
    Ok(pinned)
}

/// Every pinned route.
pub async fn pinned_routes(tx: &mut Tx<'_>) -> StoreResult<Vec<PinnedRoute>> {
    let mut conn = pg(tx).await?;
    let rows = diesel::sql_query(
        "SELECT kind, entity_id, route_key FROM cluster_routes ORDER BY kind, entity_id",
    )
    .load(&mut conn)
    .await?;
    Ok(rows)
}

/// A node leaving on purpose: its slots are released at once (no wait for
/// its lease to pass) and its row is gone.
pub async fn leave(tx: &mut Tx<'_>, node_id: &str) -> StoreResult<()> {
    let mut conn = pg(tx).await?;
    diesel::sql_query(
        "UPDATE cluster_slots SET owner = NULL, epoch = epoch + 1, acquired_at = NULL WHERE owner = $1",
    )
    .bind::<Text, _>(node_id)
    .execute(&mut conn)
    .await?;
    diesel::sql_query("DELETE FROM cluster_nodes WHERE id = $1")
        .bind::<Text, _>(node_id)
        .execute(&mut conn)
        .await?;
    Ok(())
}
