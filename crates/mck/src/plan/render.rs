//! `mck plan`'s output: the changes as text for a person, or as JSON.

use super::*;

pub(super) fn list(items: &BTreeSet<String>) -> String {
    items.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// The person-readable plan.
pub fn render(old: &Path, new: &Path, ch: &Changes) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plan: {} -> {}", old.display(), new.display());
    if !ch.streams_added.is_empty() {
        let _ = writeln!(out, "streams added: {}", list(&ch.streams_added));
    }
    if !ch.streams_removed.is_empty() {
        let _ = writeln!(out, "streams removed: {}", list(&ch.streams_removed));
    }
    if ch.clusters.is_empty() {
        let _ = writeln!(out, "no change to any cluster read");
    }
    for c in &ch.clusters {
        let _ = writeln!(
            out,
            "cluster {}: {} (bootstrap {})",
            c.cluster,
            c.kind.word(),
            c.bootstrap
        );
        match c.kind {
            Kind::Added => {
                let _ = writeln!(out, "  topics: {}", list(&c.topics_added));
            }
            Kind::Removed => {
                let _ = writeln!(out, "  topics: {}", list(&c.topics_removed));
            }
            Kind::Changed => {
                if !c.topics_added.is_empty() {
                    let _ = writeln!(out, "  topics added: {}", list(&c.topics_added));
                }
                if !c.topics_removed.is_empty() {
                    let _ = writeln!(out, "  topics removed: {}", list(&c.topics_removed));
                }
            }
        }
        for p in &c.properties {
            let detail = match (p.secret, &p.old, &p.new) {
                (true, _, _) => "(secret, value not shown)".to_string(),
                (false, Some(a), Some(b)) => format!("{a} -> {b}"),
                (false, None, Some(b)) => b.clone(),
                (false, Some(a), None) => format!("was {a}"),
                (false, None, None) => String::new(),
            };
            let _ = writeln!(out, "  property {} {}: {detail}", p.key, p.change);
        }
        for (what, a, b) in &c.offsets {
            let _ = writeln!(out, "  {what} changed: {a} -> {b}");
        }
        if let Some(rule) = &c.start {
            let _ = writeln!(
                out,
                "  new splits start at: {} ({})",
                spec_text(Some(json!(rule.offsets))),
                rule.from
            );
        }
        match &c.splits {
            Splits::NotLookedUp => {
                if c.lookup.is_some() {
                    let _ = writeln!(out, "  splits: not looked up (--offline)");
                }
            }
            Splits::Unreachable(reason) if c.bootstrap_changed => {
                let _ = writeln!(
                    out,
                    "  WARNING: the new bootstrap list {} does not answer: {reason}",
                    c.bootstrap
                );
            }
            Splits::Unreachable(reason) => {
                let _ = writeln!(out, "  splits: unknown, unreachable: {reason}");
            }
            Splits::Known {
                added,
                removed,
                missing,
            } => {
                if !added.is_empty() {
                    let _ = writeln!(out, "  splits added: {}", added.len());
                    for (t, p, start) in added {
                        match start {
                            Ok(o) => {
                                let _ = writeln!(out, "    + {t}/{p} from offset {o}");
                            }
                            Err(e) => {
                                let _ = writeln!(out, "    + {t}/{p} start unknown: {e}");
                            }
                        }
                    }
                }
                if !removed.is_empty() {
                    let _ = writeln!(out, "  splits removed: {}", removed.len());
                    for (t, p) in removed {
                        let _ = writeln!(out, "    - {t}/{p}");
                    }
                }
                for t in missing {
                    let _ = writeln!(out, "  topic {t}: missing on this cluster (no splits)");
                }
            }
        }
    }
    if !ch.unchanged.is_empty() {
        let _ = writeln!(out, "unchanged clusters: {}", list(&ch.unchanged));
    }
    out
}

/// The plan as JSON.
pub fn to_json(old: &Path, new: &Path, ch: &Changes) -> Value {
    let clusters: Vec<Value> = ch
        .clusters
        .iter()
        .map(|c| {
            let properties: Vec<Value> = c
                .properties
                .iter()
                .map(|p| {
                    let mut v = json!({ "key": p.key, "change": p.change, "secret": p.secret });
                    if !p.secret {
                        v["old"] = json!(p.old);
                        v["new"] = json!(p.new);
                    }
                    v
                })
                .collect();
            let offsets: serde_json::Map<String, Value> = c
                .offsets
                .iter()
                .map(|(what, a, b)| (what.to_string(), json!({ "old": a, "new": b })))
                .collect();
            let splits = match &c.splits {
                Splits::NotLookedUp if c.lookup.is_some() => json!({ "status": "offline" }),
                Splits::NotLookedUp => json!({ "status": "none" }),
                Splits::Unreachable(reason) => json!({ "status": "unreachable", "error": reason }),
                Splits::Known {
                    added,
                    removed,
                    missing,
                } => json!({
                    "status": "known",
                    "added": added.iter().map(|(t, p, s)| match s {
                        Ok(o) => json!({ "topic": t, "partition": p, "startOffset": o }),
                        Err(e) => json!({ "topic": t, "partition": p, "startOffset": null, "startError": e }),
                    }).collect::<Vec<_>>(),
                    "removed": removed.iter().map(|(t, p)| json!({ "topic": t, "partition": p })).collect::<Vec<_>>(),
                    "missingTopics": missing,
                }),
            };
            json!({
                "cluster": c.cluster,
                "change": c.kind.word(),
                "bootstrapServers": c.bootstrap,
                "topicsAdded": c.topics_added,
                "topicsRemoved": c.topics_removed,
                "propertiesChanged": properties,
                "offsetsChanged": offsets,
                "bootstrapChanged": c.bootstrap_changed,
                "start": c.start.as_ref().map(|r| json!({ "offsets": r.offsets, "from": r.from })),
                "splits": splits,
            })
        })
        .collect();
    json!({
        "old": old.display().to_string(),
        "new": new.display().to_string(),
        "changed": !ch.clusters.is_empty() || !ch.streams_added.is_empty() || !ch.streams_removed.is_empty(),
        "streamsAdded": ch.streams_added,
        "streamsRemoved": ch.streams_removed,
        "clusters": clusters,
        "unchangedClusters": ch.unchanged,
    })
}
