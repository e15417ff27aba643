//! A campaign's schedule, drawn from a seed: the same seed gives the same schedule. Every
//! fault and drift that starts is ended later by a step of its own, so that a campaign ends
//! with every fault over.

use std::fmt;
use std::time::Duration;

/// SplitMix64: small, and the same on every machine and release of every crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Milliseconds in `from..to`.
    pub fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.next_u64() % (to - from).max(1))
    }
}

/// What happens at one step. Instances and clusters are named by their index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// SIGKILL; a later [`Event::Restart`] starts it again.
    Kill(usize),
    Restart(usize),
    /// SIGSTOP, then SIGCONT: long enough, the lock is taken over meanwhile.
    Pause(usize),
    Resume(usize),
    /// MariaDB killed, then started again on its data.
    DatabaseDown,
    DatabaseUp,
    /// Every API call answered 503 by the proxy in front of the management server.
    ApiOutage,
    ApiBack,
    /// Every API call answered after the client's timeout.
    ApiSlow,
    ApiFast,
    /// Every state-changing call refused with 530.
    WritesRefused,
    WritesAccepted,
    /// The control node's sshd stops listening (connections refused), then listens again.
    SshRefused(usize),
    SshBack(usize),
    /// The control node's sshd stops answering (connections hang), then answers again.
    SshHang(usize),
    SshUnhang(usize),
    /// The instance's state folder (a small tmpfs) filled to the last byte, then freed.
    DiskFull(usize),
    DiskFreed(usize),
    /// The map row of the cluster's last worker deleted (an unmapped VM), then restored.
    Unmap(usize),
    Remap(usize),
    /// A Kubernetes node that is no VM joins the cluster, then leaves.
    StrayNode(usize),
    StrayGone(usize),
    /// The Kubernetes node of the cluster's first worker leaves (a VM that is not a node),
    /// then joins again.
    NodeGone(usize),
    NodeBack(usize),
    /// The cluster's first worker goes into Error (a mapped VM in Error), then Running again.
    VmError(usize),
    VmRunning(usize),
    /// The Kubernetes nodes of the cluster's first two workers swap names (each is one VM
    /// while named like the other: two identity conflicts), then take their own again.
    Swap(usize),
    Unswap(usize),
    /// The cluster is scaled: Scaling for a while, then Running with one more worker, mapped
    /// and a node.
    Scaling(usize),
    Scaled(usize),
    /// The spare cluster, Starting until now, is Running: a cluster created.
    Created(usize),
    /// The cluster is deleted, for good.
    Deleted(usize),
    /// A VM named as a node of the cluster and mapped by none appears in every cluster of
    /// several owners at once (a storm), then is expunged.
    StormOn,
    StormOff,
}

impl Event {
    /// The kind, for the summary.
    pub fn kind(self) -> &'static str {
        match self {
            Event::Kill(_) => "kill",
            Event::Restart(_) => "restart",
            Event::Pause(_) => "pause",
            Event::Resume(_) => "resume",
            Event::DatabaseDown => "database down",
            Event::DatabaseUp => "database up",
            Event::ApiOutage => "API 503",
            Event::ApiBack => "API back",
            Event::ApiSlow => "API timing out",
            Event::ApiFast => "API in time",
            Event::WritesRefused => "writes refused (530)",
            Event::WritesAccepted => "writes accepted",
            Event::SshRefused(_) => "SSH refused",
            Event::SshBack(_) => "SSH back",
            Event::SshHang(_) => "SSH hanging",
            Event::SshUnhang(_) => "SSH answering",
            Event::DiskFull(_) => "disk full",
            Event::DiskFreed(_) => "disk freed",
            Event::Unmap(_) => "drift: VM unmapped",
            Event::Remap(_) => "drift ends: VM mapped",
            Event::StrayNode(_) => "drift: node without VM",
            Event::StrayGone(_) => "drift ends: node gone",
            Event::NodeGone(_) => "drift: VM not a node",
            Event::NodeBack(_) => "drift ends: node back",
            Event::VmError(_) => "drift: mapped VM in Error",
            Event::VmRunning(_) => "drift ends: VM Running",
            Event::Swap(_) => "drift: node names swapped",
            Event::Unswap(_) => "drift ends: node names back",
            Event::Scaling(_) => "cluster scaling",
            Event::Scaled(_) => "cluster scaled",
            Event::Created(_) => "cluster created",
            Event::Deleted(_) => "cluster deleted",
            Event::StormOn => "storm of many owners",
            Event::StormOff => "storm ends",
        }
    }
}

impl Event {
    /// `Some(true)` for a fault of the whole cloud starting (an instance down, the API or the
    /// database failing, a full disk, a storm), `Some(false)` for one ending, `None` for what
    /// touches one cluster only.
    pub fn cloud_fault(self) -> Option<bool> {
        match self {
            Event::Kill(_)
            | Event::Pause(_)
            | Event::DatabaseDown
            | Event::ApiOutage
            | Event::ApiSlow
            | Event::WritesRefused
            | Event::DiskFull(_)
            | Event::StormOn => Some(true),
            Event::Restart(_)
            | Event::Resume(_)
            | Event::DatabaseUp
            | Event::ApiBack
            | Event::ApiFast
            | Event::WritesAccepted
            | Event::DiskFreed(_)
            | Event::StormOff => Some(false),
            _ => None,
        }
    }
}

/// One step: its event at `at` from the campaign's start.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub at: Duration,
    pub event: Event,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>8.1} s  {:?}", self.at.as_secs_f64(), self.event)
    }
}

/// The shape of the cloud a schedule is drawn for.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub instances: usize,
    /// Running clusters, each with a control node that answers SSH.
    pub clusters: usize,
    /// The index of the spare cluster, Starting until [`Event::Created`].
    pub spare: usize,
    /// A pause this long outlasts the lock connection's idle timeout: it is taken over.
    pub long_pause: Duration,
}

/// When each resource is free again while the schedule is drawn, so that no fault starts
/// twice at once and each one that starts is ended before the next of its kind.
struct Free {
    /// Per instance: killed or paused until then.
    instance: Vec<Duration>,
    disk: Vec<Duration>,
    /// One fault of the API or the database at a time.
    backend: Duration,
    /// Per cluster: a fault or drift of this cluster until then (`MAX`: deleted).
    cluster: Vec<Duration>,
    storm: Duration,
    created: bool,
    deleted: bool,
}

/// Room left after an end before the same resource is used again.
const SETTLE: Duration = Duration::from_millis(300);

/// Draws `events` steps from `seed`, each started fault or drift ended by a step of its own
/// (ends count as events).
pub fn draw(seed: u64, events: usize, shape: Shape) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut free = Free {
        instance: vec![Duration::ZERO; shape.instances],
        disk: vec![Duration::ZERO; shape.instances],
        backend: Duration::ZERO,
        cluster: vec![Duration::ZERO; shape.clusters],
        storm: Duration::ZERO,
        created: false,
        deleted: false,
    };
    let mut steps: Vec<Step> = Vec::new();
    let mut now = Duration::ZERO;
    let mut next_calm = CALM_EVERY;
    while steps.len() < events {
        if steps.len() >= next_calm {
            next_calm += CALM_EVERY;
            now = calm(&mut rng, &mut free, shape, &mut steps, now);
            continue;
        }
        now += rng.millis(300, 1500);
        let Some((start, lasts, mut end)) = pick(&mut rng, &mut free, shape, now) else {
            continue;
        };
        // In the last third, one drift in three is never undone: it is open when the campaign
        // ends, and must then be alerted and annotated exactly once.
        if let Event::Unmap(c)
        | Event::StrayNode(c)
        | Event::NodeGone(c)
        | Event::VmError(c)
        | Event::Swap(c) = start
            && steps.len() * 3 >= events * 2
            && rng.below(3) == 0
        {
            end = None;
            free.cluster[c] = Duration::MAX;
        }
        steps.push(Step {
            at: now,
            event: start,
        });
        if let Some(end) = end {
            steps.push(Step {
                at: now + lasts,
                event: end,
            });
        }
    }
    steps.sort_by_key(|s| s.at);
    steps
}

/// Steps drawn between two calms.
const CALM_EVERY: usize = 50;
/// How long a calm waits, once every fault is over, before its drift: longer than the time a
/// fault still counts as around a drift (`history::BEFORE_QUIET`).
const CALM_BEFORE: Duration = Duration::from_secs(11);

/// A calm: once every fault and drift drawn so far is over, nothing happens for
/// [`CALM_BEFORE`], then one drift of a free cluster lasts 9 to 11 s with nothing else
/// around it, longer than a drift left alone needs to be alerted (`history::LEFT_ALONE`).
/// Returns when the calm is over.
fn calm(
    rng: &mut Rng,
    free: &mut Free,
    shape: Shape,
    steps: &mut Vec<Step>,
    now: Duration,
) -> Duration {
    let quiet_from = steps.iter().map(|s| s.at).max().unwrap_or(now).max(now) + SETTLE;
    let opens = quiet_from + CALM_BEFORE;
    let lasts = rng.millis(9000, 11000);
    let candidates: Vec<usize> = (0..shape.clusters)
        .filter(|&c| c != shape.spare && free.cluster[c] <= quiet_from)
        .collect();
    if candidates.is_empty() {
        return opens;
    }
    let c = candidates[rng.below(candidates.len())];
    let (start, end) = match rng.below(5) {
        0 => (Event::Unmap(c), Event::Remap(c)),
        1 => (Event::StrayNode(c), Event::StrayGone(c)),
        2 => (Event::NodeGone(c), Event::NodeBack(c)),
        3 => (Event::VmError(c), Event::VmRunning(c)),
        _ => (Event::Swap(c), Event::Unswap(c)),
    };
    steps.push(Step {
        at: opens,
        event: start,
    });
    steps.push(Step {
        at: opens + lasts,
        event: end,
    });
    let over = opens + lasts + SETTLE;
    free.cluster[c] = over;
    over
}

/// One event to start at `now`, how long until it ends, and the event that ends it; `None`
/// when the drawn kind cannot start now.
fn pick(
    rng: &mut Rng,
    free: &mut Free,
    shape: Shape,
    now: Duration,
) -> Option<(Event, Duration, Option<Event>)> {
    let i = rng.below(shape.instances);
    let c = rng.below(shape.clusters);
    let kind = rng.below(21);
    // At least one other instance is up, so that the schedule is not all outage.
    let instance_free =
        free.instance[i] <= now && (0..shape.instances).any(|j| j != i && free.instance[j] <= now);
    let cluster_free = free.cluster[c] <= now && c != shape.spare;
    let (event, lasts, end) = match kind {
        0 | 1 if instance_free => (Event::Kill(i), rng.millis(500, 6000), Event::Restart(i)),
        2 | 3 if instance_free => {
            let lasts = if rng.below(2) == 0 {
                shape.long_pause + rng.millis(0, 3000)
            } else {
                rng.millis(300, 3000)
            };
            (Event::Pause(i), lasts, Event::Resume(i))
        }
        4 if free.backend <= now => (
            Event::DatabaseDown,
            rng.millis(1000, 6000),
            Event::DatabaseUp,
        ),
        5 if free.backend <= now => (Event::ApiOutage, rng.millis(1000, 6000), Event::ApiBack),
        6 if free.backend <= now => (Event::ApiSlow, rng.millis(2000, 8000), Event::ApiFast),
        7 if free.backend <= now => (
            Event::WritesRefused,
            rng.millis(1000, 8000),
            Event::WritesAccepted,
        ),
        8 if cluster_free => (
            Event::SshRefused(c),
            rng.millis(1000, 9000),
            Event::SshBack(c),
        ),
        9 if cluster_free => (
            Event::SshHang(c),
            rng.millis(1000, 9000),
            Event::SshUnhang(c),
        ),
        10 if free.disk[i] <= now => (
            Event::DiskFull(i),
            rng.millis(1000, 6000),
            Event::DiskFreed(i),
        ),
        // A short one flaps: it may be over before any cycle sees it.
        11 | 12 if cluster_free => (Event::Unmap(c), rng.millis(200, 12000), Event::Remap(c)),
        13 if cluster_free => (
            Event::StrayNode(c),
            rng.millis(200, 12000),
            Event::StrayGone(c),
        ),
        14 if cluster_free => (
            Event::NodeGone(c),
            rng.millis(200, 12000),
            Event::NodeBack(c),
        ),
        15 if cluster_free => (Event::Scaling(c), rng.millis(1000, 6000), Event::Scaled(c)),
        16 if !free.created => {
            free.created = true;
            return Some((Event::Created(shape.spare), Duration::ZERO, None));
        }
        17 if !free.deleted && cluster_free => {
            free.deleted = true;
            free.cluster[c] = Duration::MAX;
            return Some((Event::Deleted(c), Duration::ZERO, None));
        }
        18 if free.storm <= now => (Event::StormOn, rng.millis(3000, 10000), Event::StormOff),
        19 if cluster_free => (
            Event::VmError(c),
            rng.millis(200, 12000),
            Event::VmRunning(c),
        ),
        20 if cluster_free => (Event::Swap(c), rng.millis(200, 12000), Event::Unswap(c)),
        _ => return None,
    };
    let until = now + lasts + SETTLE;
    match event {
        Event::Kill(i) | Event::Pause(i) => free.instance[i] = until,
        Event::DiskFull(i) => free.disk[i] = until,
        Event::DatabaseDown | Event::ApiOutage | Event::ApiSlow | Event::WritesRefused => {
            free.backend = until;
        }
        Event::StormOn => free.storm = until,
        _ => free.cluster[c] = until,
    }
    Some((event, lasts, Some(end)))
}

/// The steps of each kind, counted.
pub fn count_by_kind(steps: &[Step]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for s in steps {
        *counts.entry(s.event.kind()).or_insert(0) += 1;
    }
    counts
}
