//! The statements a batch is written with, built once per backend: reads
//! (`load!`) and multi-row inserts (`insert_rows!`), shared by the tables'
//! parts of a batch.

/// Rows per multi-row INSERT: within SQLite's and PostgreSQL's limits on
/// bound values for the widest table (settlements, 32 columns).
pub(crate) const ROWS_PER_INSERT: usize = 500;

/// Loads `$query`, built once per backend; on PostgreSQL `FOR UPDATE`
/// when `locked`, `FOR SHARE` when `shared` (SQLite has no row locks: its
/// one writer is the committer).
macro_rules! load {
    ($tx:expr, $query:expr, shared) => {
        match $tx.parts() {
            ($crate::db::Conn::Pg(inner), behind) => {
                behind
                    .drive(async {
                        let conn = inner;
                        $query.for_share().load(conn).await
                    })
                    .await
            }
            ($crate::db::Conn::Sqlite(inner), _) => $query.load(&mut **inner).await,
        }
    };
    ($tx:expr, $query:expr, locked) => {
        match $tx.parts() {
            ($crate::db::Conn::Pg(inner), behind) => {
                behind
                    .drive(async {
                        let conn = inner;
                        $query.for_update().load(conn).await
                    })
                    .await
            }
            ($crate::db::Conn::Sqlite(inner), _) => $query.load(&mut **inner).await,
        }
    };
    ($tx:expr, $query:expr) => {
        match $tx.parts() {
            ($crate::db::Conn::Pg(inner), behind) => {
                behind
                    .drive(async {
                        let conn = inner;
                        $query.load(conn).await
                    })
                    .await
            }
            ($crate::db::Conn::Sqlite(inner), _) => $query.load(&mut **inner).await,
        }
    };
}

/// Inserts `$rows` (a `Vec` of one table's rows) with multi-row INSERTs,
/// checking that every row went in.
macro_rules! insert_rows {
    ($tx:expr, $table:expr, $rows:expr, $what:literal) => {{
        let rows = $rows;
        if rows.is_empty() {
            Ok::<(), $crate::StoreError>(())
        } else {
            match $tx.parts() {
                ($crate::db::Conn::Pg(conn), behind) => {
                    let mut result = Ok(());
                    for chunk in rows.chunks($crate::plan::statements::ROWS_PER_INSERT) {
                        let inserted = behind
                            .drive(diesel::insert_into($table).values(chunk).execute(conn))
                            .await?;
                        if inserted != chunk.len() {
                            result = Err($crate::StoreError::Conflict(format!(
                                concat!($what, ": {} of {} rows inserted"),
                                inserted,
                                chunk.len()
                            )));
                            break;
                        }
                    }
                    result
                }
                ($crate::db::Conn::Sqlite(inner), _) => inner
                    .spawn_blocking(move |conn| {
                        for chunk in rows.chunks($crate::plan::statements::ROWS_PER_INSERT) {
                            diesel::RunQueryDsl::execute(
                                diesel::insert_into($table).values(chunk),
                                conn,
                            )?;
                        }
                        Ok(())
                    })
                    .await
                    .map_err($crate::StoreError::from),
            }
        }
    }};
}
