//! The node listings of a cycle: their order, at most `ssh.concurrency` at a time, owners
//! taking turns (`turns`), all ended at the cycle's listing deadline. The listing itself is
//! `remote`'s.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tracing::{Instrument, info_span, warn};

use super::messages::TURN_MISSED;
use super::turns::Turns;
use super::{ClusterRecord, Listing, NOT_STARTED, NodeListing};
use crate::cks::{login_target, port_for};
use crate::inventory::held::HeldView;
use crate::remote::NodeLister;
use crate::snapshot::{NodeView, PreviousMap};

/// The warning of a node listing that failed.
const PARTIAL: &str = "cannot list the Kubernetes nodes; comparing the VM map with the VMs only";

/// The checkable clusters in the order their nodes are listed within each owner (only the
/// one asked for, if any); owners take turns (`turns`).
pub(super) fn listing_order(
    clusters: &[ClusterRecord],
    checkable: &[usize],
    only: Option<&str>,
    previous: &HashMap<String, PreviousMap>,
) -> Vec<usize> {
    // Listed longest ago first (never listed before all), so that every cluster gets
    // its turn when not all listings fit before the deadline: one not reached this cycle
    // is reached first next cycle, however slow the others are. Among clusters listed
    // equally long ago, those whose listing failed (a stalling or refusing node) go
    // last, so that they cannot hold the others back.
    let mut order = checkable.to_vec();
    if let Some(only) = only {
        order.retain(|&i| clusters[i].info.id == only);
    }
    order.sort_by_key(|&i| {
        previous
            .get(&clusters[i].info.id)
            .map_or((None, false), |p| (p.listed_at, p.nodes_failed))
    });
    order
}

/// A node view per checkable cluster (by index), with the failure label of listings that
/// failed. At most `concurrency` listings run at once; dropping the future aborts
/// those still running.
pub(super) async fn list_nodes(
    clusters: &[ClusterRecord],
    direct: &HashSet<String>,
    checkable: &[usize],
    lister: Arc<dyn NodeLister>,
    settings: Listing<'_>,
) -> HashMap<usize, NodeListing> {
    let deadline = tokio::time::Instant::now() + settings.deadline;
    let mut node_views = HashMap::new();
    let mut targets = Vec::with_capacity(checkable.len());
    for &i in checkable {
        let c = &clusters[i];
        let on_direct = c.network_id.as_ref().is_some_and(|id| direct.contains(id));
        match login_target(
            &c.info.id,
            c.endpoint.as_deref(),
            c.login_user.as_deref(),
            port_for(on_direct, c.info.control_nodes),
            settings.default_user,
        ) {
            Ok(mut target) => {
                // Reading stops at the longest list the cluster could be compared with.
                let vms = (c.info.expected_vms() as usize).max(c.map.len());
                target.max_nodes = crate::remote::node_bound(vms);
                targets.push((
                    c.owner_key(),
                    PlannedListing {
                        index: i,
                        target,
                        name: c.info.name.as_str().into(),
                        id: c.info.id.as_str().into(),
                    },
                ));
            }
            Err(e) => {
                let reason = e.to_string();
                node_views.insert(i, (HeldView::Unknown { reason }, None));
            }
        }
    }
    // The listings are started by a task of their own, so that starting the next as one ends
    // never waits for the pages this task is parsing meanwhile. Held in a JoinSet: dropping
    // this future aborts it, and with it the listings still running.
    let mut driver = tokio::task::JoinSet::new();
    let total = targets.len();
    let turns = Turns::new(targets);
    driver.spawn(
        drive(turns, total, lister, settings.concurrency.max(1), deadline).in_current_span(),
    );
    match driver.join_next().await {
        Some(Ok(listed)) => node_views.extend(listed),
        Some(Err(e)) => warn!(error = %e, "the node listings failed"),
        None => {}
    }
    let reason = format!(
        "the node listing did not finish within the cycle's deadline of {}",
        crate::base::duration::human_duration(settings.deadline)
    );
    for &i in checkable {
        node_views.entry(i).or_insert_with(|| {
            (
                HeldView::Unknown {
                    reason: reason.clone(),
                },
                Some("timeout"),
            )
        });
    }
    node_views
}

/// One node listing to run: the cluster's index, where to log in, and the cluster's name and
/// id for its span.
struct PlannedListing {
    index: usize,
    target: crate::remote::SshTarget,
    name: Box<str>,
    id: Box<str>,
}

/// Runs the `total` node listings of `turns` at most `concurrency` at a time, in their turns,
/// until all are done or `deadline`. Only the listings in flight are tasks, with their spans:
/// the next starts as one ends. (All at once, waiting their turn, 10,000 clusters were 10,000
/// tasks, 4.6 MB, and 10,000 spans, which grow a logging subscriber's registry by 3 MB for
/// good.)
async fn drive(
    mut turns: Turns<PlannedListing>,
    total: usize,
    lister: Arc<dyn NodeLister>,
    concurrency: usize,
    deadline: tokio::time::Instant,
) -> HashMap<usize, NodeListing> {
    let mut listings = tokio::task::JoinSet::new();
    // Whose listing each task is, to give its slot back to the turns when it ends (a task
    // that panicked included).
    let mut owners = HashMap::new();
    let mut node_views = HashMap::new();
    loop {
        while listings.len() < concurrency {
            let Some((
                owner,
                PlannedListing {
                    index: i,
                    target,
                    name,
                    id,
                },
            )) = turns.next()
            else {
                break;
            };
            let span = info_span!("cluster", cluster = %name, id = %id);
            let lister = lister.clone();
            let task = listings.spawn(
                async move {
                    match lister.list_nodes(&target).await {
                        // A list longer than the bound is dropped here, not held until the
                        // cluster is assembled (a lister that does not stop reading at it).
                        Ok(nodes) if nodes.len() > target.max_nodes => {
                            let reason = format!(
                                "the control node listed {} nodes, more than the {} the cluster \
                                 can have (twice its VMs and 20 more); the list is not compared",
                                nodes.len(),
                                target.max_nodes
                            );
                            (i, HeldView::Unknown { reason }, Some("output"))
                        }
                        // Folded as it arrives: held compactly until its cluster is assembled.
                        Ok(nodes) => (i, HeldView::fold(NodeView::Listed(nodes)), None),
                        Err(e) => {
                            warn!(
                                host = %target.host,
                                port = target.port,
                                user = %target.user,
                                error = %e,
                                "{PARTIAL}"
                            );
                            let reason = e.to_string();
                            (i, HeldView::Unknown { reason }, Some(e.reason()))
                        }
                    }
                }
                .instrument(span),
            );
            owners.insert(task.id(), owner);
        }
        match tokio::time::timeout_at(deadline, listings.join_next_with_id()).await {
            Ok(None) => break,
            Ok(Some(Ok((task, (i, view, failure))))) => {
                if let Some(owner) = owners.remove(&task) {
                    turns.finished(owner);
                }
                node_views.insert(i, (view, failure));
            }
            Ok(Some(Err(e))) => {
                if let Some(owner) = owners.remove(&e.id()) {
                    turns.finished(owner);
                }
                warn!(error = %e, "a node listing task failed");
            }
            Err(_) => {
                // Dropping the set aborts the listings still running (their connections end
                // with them); those not started are not.
                warn!(
                    unfinished = total - node_views.len(),
                    "the node listings did not all finish within the cycle's deadline"
                );
                break;
            }
        }
    }
    // Those whose turn never came: not a failure of theirs, and first next cycle.
    for rest in turns.into_waiting() {
        let reason = TURN_MISSED.to_string();
        node_views.insert(
            rest.index,
            (HeldView::Unknown { reason }, Some(NOT_STARTED)),
        );
    }
    node_views
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lister whose listing of `host` takes `delays[host]`; it records when each started.
    struct Timed {
        delays: HashMap<String, std::time::Duration>,
        started: std::sync::Mutex<Vec<(String, std::time::Duration)>>,
        epoch: tokio::time::Instant,
    }

    impl NodeLister for Timed {
        fn list_nodes<'a>(
            &'a self,
            target: &'a crate::remote::SshTarget,
        ) -> crate::remote::NodeListFuture<'a> {
            let since = self.epoch.elapsed();
            self.started
                .lock()
                .unwrap()
                .push((target.host.clone(), since));
            let delay = self.delays[&target.host];
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(vec![])
            })
        }
    }

    /// A Running cluster of `account` (none: no owner) whose control node is `host`.
    fn cluster_at(host: &str, account: Option<&str>) -> ClusterRecord {
        let mut c = serde_json::json!({
            "id": host, "name": host, "state": "Running", "controlnodes": 1, "size": 1,
            "endpoint": format!("https://{host}:6443/"),
        });
        if let Some(account) = account {
            c["account"] = account.into();
            c["domainid"] = "d".into();
        }
        ClusterRecord::new(serde_json::from_value(c).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn one_owners_slow_clusters_do_not_hold_back_anothers() {
        // Six clusters of one tenant answering in 10 s, listed longest ago, then one of
        // another tenant answering in 1 s; 2 listings at a time, 25 s for all.
        let mut clusters: Vec<ClusterRecord> = (0..6)
            .map(|n| cluster_at(&format!("10.0.0.{n}"), Some("slowpoke")))
            .collect();
        clusters.push(cluster_at("10.0.1.1", Some("alice")));
        let second = |s: u64| std::time::Duration::from_secs(s);
        let mut delays: HashMap<String, _> = clusters
            .iter()
            .map(|c| (c.info.id.clone(), second(10)))
            .collect();
        delays.insert("10.0.1.1".into(), second(1));
        let lister = Arc::new(Timed {
            delays,
            started: Default::default(),
            epoch: tokio::time::Instant::now(),
        });
        let settings = Listing {
            concurrency: 2,
            default_user: "cloud",
            deadline: second(25),
            only: None,
        };
        let order: Vec<usize> = (0..clusters.len()).collect();
        let nodes = list_nodes(&clusters, &HashSet::new(), &order, lister.clone(), settings).await;
        // alice's cluster takes the second slot at once; the slow tenant's take every slot
        // free after it, in their own order, until the deadline.
        let started = lister.started.lock().unwrap().clone();
        let expected: Vec<(String, std::time::Duration)> = [
            ("10.0.0.0", 0),
            ("10.0.1.1", 0),
            ("10.0.0.1", 1),
            ("10.0.0.2", 10),
            ("10.0.0.3", 11),
            ("10.0.0.4", 20),
            ("10.0.0.5", 21),
        ]
        .iter()
        .map(|&(host, at)| (host.to_string(), second(at)))
        .collect();
        assert_eq!(started, expected);
        let failures: Vec<Option<&str>> = (0..clusters.len()).map(|i| nodes[&i].1).collect();
        assert_eq!(
            failures,
            [
                None,
                None,
                None,
                None,
                Some("timeout"),
                Some("timeout"),
                None
            ]
        );
        assert_eq!(nodes[&6].0.clone().unfold(), NodeView::Listed(vec![]));
    }
}
