//! Where the client meets the simulated CloudStack in memory: a [`Transport`] that hands each
//! request to a [`Sim`], and the conversions between the checker's clock and the simulator's.
//!
//! The simulator is a crate of its own with its own request, answer and time types (it shares
//! no code with the client it checks); this module is the only place that converts between
//! the two. The `demo` command uses it, and so do tests that run the client without HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use cks_drift_sim::{Sim, SimTime};

use crate::base::time::Timestamp;
use crate::cloudstack::request::ApiRequest;
use crate::cloudstack::transport::{RawResponse, Transport, TransportFuture};

/// A transport that answers from a [`Sim`] in memory. It sleeps for the simulator's latency,
/// so it needs no deadline of its own beyond that.
#[derive(Clone)]
pub struct SimTransport(pub Arc<Sim>);

impl Transport for SimTransport {
    fn send(&self, request: ApiRequest) -> TransportFuture<'_> {
        Box::pin(async move {
            let latency = self.0.latency();
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            // The HTTP server keeps the first value of a repeated name; so does this.
            let mut params = BTreeMap::new();
            for (name, value) in request.params {
                params.entry(name).or_insert(value);
            }
            let answer = self.0.handle(&request.command, &params);
            Ok(RawResponse {
                status: answer.status,
                body: answer.body,
            }
            .into())
        })
    }
}

// Both clocks count whole seconds since the Unix epoch, UTC.
impl From<Timestamp> for SimTime {
    fn from(t: Timestamp) -> SimTime {
        SimTime::from_unix(t.unix())
    }
}

impl From<SimTime> for Timestamp {
    fn from(t: SimTime) -> Timestamp {
        Timestamp::from_unix(t.unix())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cks_drift_sim::World;
    use serde_json::Value;

    use super::*;
    use crate::cloudstack::transport::Answer;

    #[tokio::test]
    async fn answers_in_memory_with_the_first_value_of_a_repeated_name() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let admin = w.admin();
        w.add_cluster("prod", admin, 1, 1, 0);
        let sim = Arc::new(Sim::new(w));
        sim.set_latency(Duration::from_millis(1));
        let transport = SimTransport(sim.clone());
        let response = transport
            .send(ApiRequest {
                command: "listKubernetesClusters".into(),
                params: vec![
                    ("listall".into(), "true".into()),
                    ("listall".into(), "false".into()),
                ],
            })
            .await
            .unwrap();
        let Answer::Whole(response) = response else {
            panic!("{response:?}");
        };
        assert_eq!(response.status, 200);
        let v: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(v["listkubernetesclustersresponse"]["count"], 1);
        assert_eq!(sim.calls()[0].params["listall"], "true", "first value wins");
    }

    #[tokio::test]
    async fn errors_keep_their_status_and_body() {
        let sim = Arc::new(Sim::new(World::new(SimTime::from_unix(0))));
        sim.fail_next("listAlerts", 1, 503, "<html>busy</html>");
        let response = SimTransport(sim)
            .send(ApiRequest {
                command: "listAlerts".into(),
                params: Vec::new(),
            })
            .await
            .unwrap();
        assert!(
            matches!(&response, Answer::Whole(raw) if *raw == RawResponse {
                status: 503,
                body: "<html>busy</html>".into()
            }),
            "{response:?}"
        );
    }

    #[test]
    fn the_clocks_convert_both_ways_to_the_same_instant() {
        let t = Timestamp::parse("2026-05-04T09:00:00Z").unwrap();
        let s = SimTime::from(t);
        assert_eq!(s.to_cloudstack(), "2026-05-04T09:00:00+0000");
        assert_eq!(Timestamp::from(s), t);
        assert_eq!(Timestamp::parse(&s.to_cloudstack()), Some(t));
    }
}
