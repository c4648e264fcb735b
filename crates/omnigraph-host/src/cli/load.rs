//! `omnigraph-host load`: a file split into bounded batches (one batch, one
//! commit, when every table fits), committed in order into a local root or
//! through a host, with a progress bar and a checkpoint for `--resume`.

use std::path::{Path, PathBuf};

use omnigraph_host::LoadRequest;
use omnigraph_host::split::{Batch, Checkpoint, Pass, Position, Splitter, WorkBranch, file_sha256, types_named};
use omnigraph_validate_wasm::Mode;

use super::target::{Target, TargetArgs, refused_lines};
use super::common::{Failure, ModeArg, operational};

#[derive(clap::Args)]
pub(crate) struct LoadArgs {
    #[command(flatten)]
    target: TargetArgs,
    file: PathBuf,
    #[arg(long, default_value = "main")]
    branch: String,
    /// Fork the branch from this one if it does not exist.
    #[arg(long)]
    from: Option<String>,
    #[arg(long, value_enum, default_value = "merge")]
    mode: ModeArg,
    #[arg(long, default_value = "cli")]
    actor: String,
    /// Continue after the last committed batch of an interrupted run.
    #[arg(long)]
    resume: bool,
    /// Records of any one type per batch (default and most: the graph's
    /// rows-per-table bound).
    #[arg(long, alias = "batch-lines")]
    batch_rows: Option<usize>,
    /// Bytes per batch (default and most: the graph's body bound).
    #[arg(long)]
    batch_bytes: Option<u64>,
}

pub(crate) async fn run(LoadArgs { target, file, branch, from, mode, actor, resume, batch_rows, batch_bytes }: LoadArgs) -> Result<(), Failure> {
    // Hashed (for the checkpoint) while the graph opens and the
    // validator's module loads: each costs a process a few
    // milliseconds that need not add up.
    let file_sha256 = tokio::task::spawn_blocking({
        let file = file.clone();
        move || file_sha256(&file)
    });
    let target = target.open().await?;
    let bounds = target.limits().await?;
    let job = LoadJob {
        file: &file,
        branch: &branch,
        from,
        mode: mode.into(),
        actor: &actor,
        resume,
        batch_rows: batch_rows.map_or(bounds.max_table_rows, |rows| rows as u64).clamp(1, bounds.max_table_rows.max(1)) as usize,
        batch_bytes: batch_bytes.unwrap_or(bounds.max_batch_bytes).clamp(1, bounds.max_batch_bytes) as usize,
    };
    let file_sha256 = file_sha256.await.map_err(operational)?.map_err(operational)?;
    load_file(&target, job, file_sha256).await?;
    Ok(())
}

/// What `load` was asked to do.
struct LoadJob<'a> {
    file: &'a Path,
    branch: &'a str,
    from: Option<String>,
    mode: Mode,
    actor: &'a str,
    resume: bool,
    batch_rows: usize,
    batch_bytes: usize,
}

/// Tells which file lines a refused batch's report lines are (reports
/// count lines within the batch).
fn print_file_lines(batch: &Batch, details: Option<&serde_json::Value>) {
    let Some(details) = details else { return };
    for line in refused_lines(details).into_keys().take(100) {
        if let Some(file_line) = batch.file_line(line) {
            eprintln!("  batch line {line} is line {file_line} of the file");
        }
    }
}

/// Streams the file into batches and commits them in order (nodes before
/// edges once the file is split), with a progress bar and a checkpoint file
/// for `--resume`. An overwrite of several batches goes through a work
/// branch published in one commit (`Graph::publish_overwrite`). `digest`
/// is the file's SHA-256, which ties a checkpoint to the file.
async fn load_file(target: &Target, job: LoadJob<'_>, digest: String) -> Result<(), Failure> {
    let checkpoint_path = Checkpoint::path_for(job.file);
    let mut checkpoint = match (job.resume, Checkpoint::read(&checkpoint_path).map_err(operational)?) {
        (true, Some(previous)) if previous.file_sha256 != digest => {
            return Err(operational("--resume: the file changed since the interrupted run"));
        }
        // A resumed run splits with the interrupted run's bounds.
        (true, Some(previous)) => previous,
        (true, None) => return Err(operational(format!("--resume: no checkpoint at {}", checkpoint_path.display()))),
        (false, _) => Checkpoint::new(digest, job.batch_rows, job.batch_bytes),
    };
    let mut splitter = Splitter::open(job.file, checkpoint.batch_rows, checkpoint.batch_bytes).map_err(operational)?;
    let len = splitter.len();
    // A batch may have committed after the last checkpoint write: the
    // graph's log knows (each commit carries its batch key).
    if let Some(work) = &checkpoint.overwrite {
        if target.committed_keys(job.branch).await?.contains(&checkpoint.publish_key()) {
            eprintln!("the overwrite was already published");
            return Checkpoint::remove(&checkpoint_path).map_err(operational);
        }
        let keys = target.committed_keys(&work.branch).await?;
        checkpoint.catch_up(&keys, len);
    } else {
        checkpoint.catch_up(&target.committed_keys(job.branch).await?, len);
    }
    let bar = indicatif::ProgressBar::new(len.max(1));
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg}").expect("progress template"));
    let mut commits = 0u64;

    if checkpoint.next.pass == Pass::All {
        let whole = if checkpoint.next.offset == 0 { splitter.whole_file().map_err(operational)? } else { None };
        match whole {
            None if checkpoint.next.offset >= len && len > 0 => {}
            None if len == 0 => {}
            None => checkpoint.next = Position { pass: Pass::Nodes, offset: 0 },
            Some(batch) => {
                // The run id and batch key are on disk before anything is
                // sent: whatever happens to the answer, --resume can tell.
                checkpoint.write(&checkpoint_path).map_err(operational)?;
                let request = batch_request(&job, job.branch, job.mode, job.from.clone(), &batch, &checkpoint.run);
                match target.load(request).await {
                    Ok(()) => {
                        checkpoint.next.offset = len;
                        commits += 1;
                    }
                    Err(refused) if refused.splittable => {
                        eprintln!("the file is over a bound as one batch; splitting it");
                        checkpoint.next = Position { pass: Pass::Nodes, offset: 0 };
                        checkpoint.write(&checkpoint_path).map_err(operational)?;
                    }
                    Err(refused) if refused.maybe_written => {
                        bar.abandon_with_message("stopped: the file may have been committed; run again with --resume");
                        return Err(refused.reported("the file (one batch)"));
                    }
                    Err(refused) => {
                        print_file_lines(&batch, refused.details.as_ref());
                        Checkpoint::remove(&checkpoint_path).map_err(operational)?;
                        bar.abandon_with_message("stopped: nothing of the file was written");
                        return Err(refused.failure);
                    }
                }
            }
        }
    }

    if checkpoint.next.pass != Pass::All {
        if job.mode == Mode::Overwrite && checkpoint.overwrite.is_none() {
            let types = types_named(job.file, checkpoint.batch_bytes).map_err(operational)?;
            let work_name = checkpoint.work_branch_name();
            let base_seq = match target.fork(&work_name, job.branch, &types).await {
                Err(Failure::Operational(text) | Failure::Invalid(text)) if text.contains("branch_not_found") && job.from.is_some() => {
                    target.fork(job.branch, job.from.as_deref().expect("checked"), &[]).await?;
                    target.fork(&work_name, job.branch, &types).await?
                }
                other => other?,
            };
            checkpoint.overwrite = Some(WorkBranch { branch: work_name, base_seq, types });
            checkpoint.write(&checkpoint_path).map_err(operational)?;
        }
        let (branch, mode, from) = match &checkpoint.overwrite {
            Some(work) => (work.branch.clone(), Mode::Append, None),
            None => (job.branch.to_owned(), job.mode, job.from.clone()),
        };
        splitter.seek(checkpoint.next).map_err(operational)?;
        // As for a whole file: the run id is on disk before a batch is sent.
        checkpoint.write(&checkpoint_path).map_err(operational)?;
        let mut smaller: Vec<Batch> = Vec::new();
        loop {
            let batch = match smaller.pop() {
                Some(batch) => batch,
                None => match splitter.next_batch().map_err(operational)? {
                    Some(batch) => batch,
                    None => break,
                },
            };
            let request = batch_request(&job, &branch, mode, from.clone(), &batch, &checkpoint.run);
            match target.load(request).await {
                Ok(()) => {
                    checkpoint.next = Position { pass: batch.pass, offset: batch.end };
                    checkpoint.write(&checkpoint_path).map_err(operational)?;
                    commits += 1;
                    let done = if batch.pass == Pass::Edges { len / 2 + batch.end / 2 } else { batch.end / 2 };
                    bar.set_position(done);
                    bar.set_message(format!("{commits} commits ({})", if batch.pass == Pass::Edges { "edges" } else { "nodes" }));
                }
                Err(refused) if refused.splittable && batch.lines.len() > 1 => {
                    let (first, second) = batch.halves().expect("two lines or more");
                    smaller.push(second);
                    smaller.push(first);
                }
                Err(refused) if refused.maybe_written => {
                    let what = format!(
                        "the batch of file lines {}..={}",
                        batch.lines.first().map_or(0, |l| l.0),
                        batch.lines.last().map_or(0, |l| l.0)
                    );
                    bar.abandon_with_message(format!("stopped: {what} may have been committed; run again with --resume"));
                    return Err(refused.reported(&what));
                }
                Err(refused) => {
                    print_file_lines(&batch, refused.details.as_ref());
                    let target_note = if checkpoint.overwrite.is_some() { ", and the target is unchanged" } else { "" };
                    bar.abandon_with_message(format!(
                        "stopped at file lines {}..={} (nothing of this batch was written{target_note}); fix it and run again with --resume",
                        batch.lines.first().map_or(0, |l| l.0),
                        batch.lines.last().map_or(0, |l| l.0)
                    ));
                    return Err(refused.failure);
                }
            }
        }
        if let Some(work) = &checkpoint.overwrite {
            if let Err(refused) = target.publish(job.branch, work, checkpoint.publish_key(), job.actor).await {
                bar.abandon_with_message(if refused.maybe_written {
                    "the overwrite may have been published; run again with --resume"
                } else {
                    "the overwrite was not published: the target is unchanged"
                });
                return Err(refused.reported("the overwrite's publish"));
            }
            commits += 1;
        }
    }
    bar.set_position(len.max(1));
    bar.finish_with_message(format!("{commits} commits"));
    Checkpoint::remove(&checkpoint_path).map_err(operational)?;
    if checkpoint.next.pass != Pass::All {
        target.maintain_after(commits).await;
    }
    Ok(())
}

/// The load request of one batch of a file.
fn batch_request(job: &LoadJob<'_>, branch: &str, mode: Mode, from: Option<String>, batch: &Batch, run: &str) -> LoadRequest {
    LoadRequest {
        branch: branch.to_owned(),
        from,
        mode,
        strict: true,
        actor: job.actor.to_owned(),
        batch: batch.bytes.clone(),
        batch_key: Some(batch.key(run)),
        unchanged_since: None,
    }
}
