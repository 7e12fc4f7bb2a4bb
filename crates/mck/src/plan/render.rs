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
            for s in ch.switches.iter().filter(|s| s.mirror == c.cluster) {
                let _ = writeln!(
                    out,
                    "  except splits that continue {}'s: right after its last records (switch in stream {} below)",
                    s.source, s.stream
                );
            }
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
    for s in &ch.switches {
        render_switch(&mut out, s);
    }
    if !ch.unchanged.is_empty() {
        let _ = writeln!(out, "unchanged clusters: {}", list(&ch.unchanged));
    }
    out
}

/// A switch onto a mirror: a head line, where positions come from, then a line per
/// partition (`topic/p continues source topic/p after offset N: lower bound M (how)`,
/// flags in brackets).
fn render_switch(out: &mut String, s: &Switch) {
    let _ = writeln!(
        out,
        "switch in stream {}: {} -> {} (translate {})",
        s.stream,
        s.source,
        s.mirror,
        s.mirror_of.translate.as_str()
    );
    match &s.checkpoint {
        Some(file) => {
            let _ = writeln!(out, "  positions: checkpoint {}", file.display());
        }
        None => {
            let _ = writeln!(
                out,
                "  translated offsets need a checkpoint (--checkpoint-dir DIR or --checkpoint FILE): pairing only"
            );
        }
    }
    match &s.status {
        SwitchStatus::Offline => {
            let _ = writeln!(
                out,
                "  mirror partitions and translated offsets: not looked up (--offline)"
            );
        }
        SwitchStatus::Unreachable(reason) => {
            let _ = writeln!(
                out,
                "  WARNING: the mirror {} does not answer: {reason}",
                s.mirror
            );
        }
        SwitchStatus::Known => {}
    }
    if let Some(warning) = &s.sync_warning {
        let _ = writeln!(out, "  WARNING: {warning}");
    }
    for (topic, source_topic) in &s.topics {
        let source_topic = source_topic.as_deref().unwrap_or("?");
        let rows: Vec<&SwitchPartition> =
            s.partitions.iter().filter(|p| &p.topic == topic).collect();
        if rows.is_empty() {
            let _ = writeln!(out, "  {topic} continues {} {source_topic}", s.source);
        }
        for p in rows {
            let mut line = match p.partition {
                Some(n) => format!("  {topic}/{n} continues {} {source_topic}/{n}", s.source),
                None => format!("  {topic} continues {} {source_topic}", s.source),
            };
            match (p.source_offset, p.source_next_offset) {
                (Some(o), _) => {
                    let _ = write!(line, " after offset {o}");
                }
                (None, Some(next)) => {
                    let _ = write!(line, " at offset {next} (nothing handed out)");
                }
                (None, None) => {}
            }
            if let (Some(lb), Some(how)) = (p.lower_bound, &p.found_by) {
                let _ = write!(line, ": lower bound {lb} ({how})");
            }
            if !p.flags.is_empty() {
                let _ = write!(line, "  [{}]", p.flags.join(", "));
            }
            let _ = writeln!(out, "{line}");
            if let Some(note) = &p.note {
                let _ = writeln!(out, "    {note}");
            }
        }
    }
}

/// The switches as JSON.
fn switches_json(switches: &[Switch]) -> Vec<Value> {
    switches
        .iter()
        .map(|s| {
            let (status, error) = match &s.status {
                SwitchStatus::Offline => ("offline", None),
                SwitchStatus::Unreachable(reason) => ("unreachable", Some(reason)),
                SwitchStatus::Known => ("known", None),
            };
            let partitions: Vec<Value> = s
                .partitions
                .iter()
                .map(|p| {
                    json!({
                        "topic": p.topic,
                        "partition": p.partition,
                        "sourceTopic": p.source_topic,
                        "sourceOffset": p.source_offset,
                        "sourceNextOffset": p.source_next_offset,
                        "lowerBound": p.lower_bound,
                        "foundBy": p.found_by,
                        "mirrorEnd": p.mirror_end,
                        "flags": p.flags,
                        "note": p.note,
                    })
                })
                .collect();
            let mut v = json!({
                "stream": s.stream,
                "source": s.source,
                "mirror": s.mirror,
                "translate": s.mirror_of.translate.as_str(),
                "checkpoint": s.checkpoint.as_ref().map(|f| f.display().to_string()),
                "status": status,
                "topics": s.topics.iter().map(|(t, from)| json!({ "topic": t, "sourceTopic": from })).collect::<Vec<_>>(),
                "partitions": partitions,
            });
            if let Some(e) = error {
                v["error"] = json!(e);
            }
            if let Some(w) = &s.sync_warning {
                v["syncWarning"] = json!(w);
            }
            v
        })
        .collect()
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
        "switches": switches_json(&ch.switches),
    })
}
