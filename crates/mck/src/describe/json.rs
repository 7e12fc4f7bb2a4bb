//! `mck describe --json`: the same tree as JSON.

use std::collections::BTreeMap;

use multicluster_kafka::inspect::{ClusterState, Inspection};
use multicluster_kafka::metadata::KafkaStream;
use multicluster_kafka::unstable::plan::is_standby;
use serde_json::{Value, json};

use super::mirrors::{MirrorPositions, behind_source};
use crate::clusters::{failure_reason, shown_bootstrap};

/// The same as JSON: `{group, streams: [{stream, clusters: [{cluster, bootstrapServers,
/// mirrorOf: {cluster, translate, standby}, state, reachable, error, refusedProperty,
/// kafkaClusterId, topics: [{topic, missing, lag, behindSource, behindSourceSeconds,
/// partitions: [{partition, earliest, latest, committed, lag}]}], group: {protocol,
/// state, members} or {error}}]}]}`. `state` is
/// `connected`, `unreachable`, `rejected` or `refused`; `refusedProperty` the key
/// librdkafka refused (or null); `error` why the cluster could not be described;
/// `behindSource` the records a mirror lacks, `behindSourceSeconds` how much older a
/// timestamp mirror's newest record is (each null where not known).
pub fn to_json(
    streams: &BTreeMap<String, KafkaStream>,
    reports: &BTreeMap<String, Inspection>,
    mirrors: &MirrorPositions,
    group: Option<&str>,
) -> Value {
    let streams: Vec<Value> = streams
        .iter()
        .map(|(id, stream)| {
            let clusters: Vec<Value> = stream
                .clusters
                .iter()
                .map(|(cid, meta)| {
                    let mut c = json!({
                        "cluster": cid,
                        "bootstrapServers": shown_bootstrap(&meta.properties),
                    });
                    let Some(inspection) = reports.get(cid) else {
                        c["state"] = Value::Null;
                        c["reachable"] = Value::Null;
                        return c;
                    };
                    c["mirrorOf"] = meta.mirror_of.as_ref().map_or(Value::Null, |m| {
                        json!({
                            "cluster": m.cluster,
                            "translate": m.translate.as_str(),
                            "standby": is_standby(stream, meta),
                        })
                    });
                    c["state"] = json!(inspection.state.name());
                    c["reachable"] = json!(inspection.state == ClusterState::Connected);
                    c["refusedProperty"] = match &inspection.state {
                        ClusterState::Refused(r) => json!(r.key),
                        _ => Value::Null,
                    };
                    match &inspection.result {
                        Ok(r) => {
                            let topics: Vec<Value> = meta
                                .topics
                                .iter()
                                .map(|t| match r.topics.get(t) {
                                    Some(parts) => json!({
                                        "topic": t,
                                        "missing": false,
                                        "lag": group.and(r.topic_lag(t)),
                                        "behindSource": behind_source(cid, meta, t, parts, reports, mirrors),
                                        "behindSourceSeconds": mirrors.behind_ms.get(&(cid.clone(), t.clone())).map(|ms| *ms as f64 / 1000.0),
                                        "partitions": parts.iter().map(|p| json!({
                                            "partition": p.partition,
                                            "earliest": p.earliest,
                                            "latest": p.latest,
                                            "committed": p.committed,
                                            "lag": p.lag(),
                                        })).collect::<Vec<_>>(),
                                    }),
                                    None => json!({ "topic": t, "missing": true, "lag": null, "partitions": [] }),
                                })
                                .collect();
                            c["error"] = Value::Null;
                            c["kafkaClusterId"] = json!(r.kafka_cluster_id);
                            c["group"] = match &r.group {
                                Some(Ok(d)) => json!({
                                    "protocol": d.protocol.name(),
                                    "state": d.state,
                                    "members": d.members,
                                }),
                                Some(Err(e)) => json!({ "error": e }),
                                None => Value::Null,
                            };
                            c["topics"] = json!(topics);
                        }
                        Err(e) => {
                            c["error"] = json!(match &inspection.state {
                                ClusterState::Refused(r) => r.to_string(),
                                _ => failure_reason(e),
                            });
                            c["kafkaClusterId"] = Value::Null;
                            c["topics"] = json!(meta
                                .topics
                                .iter()
                                .map(|t| json!({ "topic": t }))
                                .collect::<Vec<_>>());
                        }
                    }
                    c
                })
                .collect();
            json!({ "stream": id, "clusters": clusters })
        })
        .collect();
    json!({ "group": group, "streams": streams })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::tests::{reports, streams};

    #[test]
    fn json_has_every_field_and_marks_the_unreachable_cluster() {
        let v = to_json(
            &streams(),
            &reports(),
            &MirrorPositions::default(),
            Some("g"),
        );
        let clusters = &v["streams"][0]["clusters"];
        assert_eq!(clusters[0]["kafkaClusterId"], "K1");
        assert_eq!(clusters[0]["group"]["protocol"], "consumer");
        assert_eq!(clusters[0]["group"]["members"], 3);
        assert_eq!(clusters[0]["topics"][1]["topic"], "orders");
        assert_eq!(clusters[0]["topics"][1]["lag"], 34);
        assert_eq!(clusters[0]["topics"][1]["partitions"][0]["committed"], 1200);
        assert_eq!(
            clusters[0]["topics"][1]["partitions"][1]["committed"],
            Value::Null
        );
        assert_eq!(clusters[0]["topics"][0]["missing"], true);
        assert_eq!(clusters[1]["reachable"], false);
        assert_eq!(clusters[1]["state"], "unreachable");
        assert_eq!(clusters[1]["error"], "metadata request: timed out");
        assert!(!v.to_string().contains("hunter2"));
    }
}
