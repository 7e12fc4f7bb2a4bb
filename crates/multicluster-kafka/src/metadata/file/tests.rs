use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::base::offsets::{OffsetReset, StartingOffsets, StoppingOffsets};
use crate::metadata::KafkaMetadataService;

const SECRET: &str = "S3CRET-do-not-print";

fn env(name: &str) -> Option<String> {
    match name {
        "PASSWORD" => Some(SECRET.into()),
        "EAST_BOOTSTRAP" => Some(format!("{SECRET}-east:9092")),
        "OTHER_BOOTSTRAP" => Some(format!("{SECRET}-other:9092")),
        "WEST_BOOTSTRAP" => Some("west-1:9092".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
    parse_metadata_with(text, Path::new("streams.yaml"), &env)
}

/// The error and the line it points at; also checks every error is one line and
/// shows no secret.
fn error_line(text: &str) -> (MetadataError, u32) {
    let err = parse(text).expect_err("the file must be rejected");
    let shown = err.to_string();
    assert!(!shown.contains(SECRET), "secret in {shown}");
    assert!(!shown.contains('\n'), "multi-line {shown}");
    assert!(shown.starts_with("streams.yaml:"), "no file in {shown}");
    let line = err.location().map(|l| l.line).unwrap_or(0);
    (err, line)
}

const FLINK: &str = "\
- streamId: orders
  clusterMetadataList:
    - clusterId: east
      bootstrapServers: east-1:9092,east-2:9092
      topics: [orders, orders-v2]
    - clusterId: west
      bootstrapServers: west-1:9092
      topics:
        - orders
- streamId: payments
  clusterMetadataList:
    - clusterId: east
      bootstrapServers: east-1:9092,east-2:9092
      topics: [payments]
";

const RICH: &str = r#"
version: 1
clusters:
  east:
    bootstrapServers: east-1:9092
    properties:
      security.protocol: SASL_SSL
      sasl.username: app
      sasl.password: "${env:PASSWORD}"
      session.timeout.ms: 30000
      enable.auto.commit: false
    startingOffsets: earliest
    stoppingOffsets: {timestamp: 1700000000000}
  west:
    properties: { bootstrap.servers: "${env:WEST_BOOTSTRAP}" }
streams:
  orders:
    clusters:
      east: { topics: [orders] }
      west:
        topics: [orders, orders-v2]
        startingOffsets: {committed: {reset: latest}}
        properties: { client.id: orders-west }
"#;

#[test]
fn the_flink_layout_reads_as_streams_of_clusters() {
    let streams = parse(FLINK).unwrap();
    assert_eq!(streams.keys().collect::<Vec<_>>(), ["orders", "payments"]);
    let orders = &streams["orders"];
    assert_eq!(orders.stream_id, "orders");
    let east = &orders.clusters["east"];
    assert_eq!(east.bootstrap_servers(), "east-1:9092,east-2:9092");
    assert_eq!(
        east.topics,
        BTreeSet::from(["orders".into(), "orders-v2".into()])
    );
    assert_eq!(east.properties.len(), 1);
    assert_eq!(east.starting_offsets, None);
    assert_eq!(orders.clusters["west"].topics.len(), 1);
    assert_eq!(
        streams["payments"].clusters["east"].bootstrap_servers(),
        east.bootstrap_servers()
    );
}

#[test]
fn the_rich_layout_merges_cluster_definitions_with_stream_overrides() {
    let streams = parse(RICH).unwrap();
    let east = &streams["orders"].clusters["east"];
    assert_eq!(east.bootstrap_servers(), "east-1:9092");
    assert_eq!(east.properties.get("sasl.password"), Some(SECRET));
    assert_eq!(east.properties.get("session.timeout.ms"), Some("30000"));
    assert_eq!(east.properties.get("enable.auto.commit"), Some("false"));
    assert_eq!(east.starting_offsets, Some(StartingOffsets::Earliest));
    assert_eq!(
        east.stopping_offsets,
        Some(StoppingOffsets::Timestamp(1_700_000_000_000))
    );

    let west = &streams["orders"].clusters["west"];
    assert_eq!(west.bootstrap_servers(), "west-1:9092");
    assert_eq!(west.properties.get("client.id"), Some("orders-west"));
    assert_eq!(
        west.starting_offsets,
        Some(StartingOffsets::Committed {
            reset: OffsetReset::Latest
        })
    );
    assert_eq!(west.stopping_offsets, None);
}

#[test]
fn resolved_values_are_secrets_in_debug_output() {
    let streams = parse(RICH).unwrap();
    let shown = format!("{streams:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains("sasl.username"), "{shown}");
    // A value from a reference is secret whatever its key.
    let text = "clusters:\n  c:\n    bootstrapServers: b:1\n    properties: {client.id: \"${env:PASSWORD}\"}\n\
                streams:\n  s:\n    clusters:\n      c: {topics: [t]}\n";
    let streams = parse(text).unwrap();
    let props = &streams["s"].clusters["c"].properties;
    assert!(props.is_secret("client.id"));
    assert!(!format!("{streams:?}").contains(SECRET));
}

#[test]
fn a_double_dollar_is_a_literal_dollar_brace() {
    let text = "- streamId: s\n  clusterMetadataList:\n    - clusterId: c\n      bootstrapServers: b:1\n      \
                topics: [t]\n      properties: {client.id: \"$${env:PASSWORD}\"}\n";
    let streams = parse(text).unwrap();
    let props = &streams["s"].clusters["c"].properties;
    assert_eq!(props.get("client.id"), Some("${env:PASSWORD}"));
    assert!(!props.is_secret("client.id"));
}

#[test]
fn a_yaml_syntax_error_names_file_line_and_column() {
    let (err, line) = error_line("- streamId: s\n  clusterMetadataList: [\n");
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
    assert_eq!(line, 2, "{err}");
}

#[test]
fn an_unknown_field_is_a_syntax_error_on_its_line() {
    let (err, line) = error_line(&RICH.replace(
        "    startingOffsets: earliest",
        "    startOffsets: earliest",
    ));
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
    assert!(err.to_string().contains("startOffsets"), "{err}");
    assert_eq!(line, 12);
}

#[test]
fn a_bad_offset_spec_is_a_syntax_error_on_its_line() {
    let (err, line) =
        error_line(&RICH.replace("startingOffsets: earliest", "startingOffsets: oldest"));
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
    assert_eq!(line, 12);
}

#[test]
fn a_cluster_without_bootstrap_servers_points_at_the_cluster() {
    let flink = FLINK.replace("      bootstrapServers: west-1:9092\n", "");
    let (err, line) = error_line(&flink);
    assert!(
        matches!(&err, MetadataError::MissingBootstrapServers { cluster, .. } if cluster == "west"),
        "{err}"
    );
    assert_eq!(line, 6);

    let rich = RICH.replace("    bootstrapServers: east-1:9092\n", "");
    let (err, line) = error_line(&rich);
    assert!(
        matches!(&err, MetadataError::MissingBootstrapServers { cluster, .. } if cluster == "east"),
        "{err}"
    );
    assert_eq!(line, 4);

    let blank = FLINK.replace("bootstrapServers: west-1:9092", "bootstrapServers: ' '");
    let (err, line) = error_line(&blank);
    assert!(
        matches!(err, MetadataError::MissingBootstrapServers { .. }),
        "{err}"
    );
    assert_eq!(line, 7);
}

#[test]
fn one_cluster_id_with_two_bootstrap_lists_names_both_places() {
    let text = FLINK.replacen(
        "bootstrapServers: east-1:9092,east-2:9092\n      topics: [payments]",
        "bootstrapServers: east-9:9092\n      topics: [payments]",
        1,
    );
    let (err, line) = error_line(&text);
    match &err {
        MetadataError::ConflictingBootstrapServers {
            cluster,
            first_location,
            second,
            ..
        } => {
            assert_eq!(cluster, "east");
            assert_eq!(second, "east-9:9092");
            assert_eq!(first_location.as_ref().map(|l| l.line), Some(4));
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(line, 13);
    assert!(err.to_string().contains("streams.yaml:4:"), "{err}");
}

#[test]
fn conflicting_bootstrap_lists_from_references_are_shown_as_written() {
    let text = "\
- streamId: a
  clusterMetadataList:
    - {clusterId: east, bootstrapServers: '${env:EAST_BOOTSTRAP}', topics: [t]}
- streamId: b
  clusterMetadataList:
    - {clusterId: east, bootstrapServers: '${env:OTHER_BOOTSTRAP}', topics: [t]}
";
    let (err, line) = error_line(text);
    assert!(
        matches!(err, MetadataError::ConflictingBootstrapServers { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("${env:OTHER_BOOTSTRAP}"), "{err}");
    assert_eq!(line, 6);
}

#[test]
fn names_lists_and_paths_with_line_breaks_are_quoted_on_one_line() {
    let twice = "clusters:\n  e:\n    bootstrapServers: a:1\n    properties: {\"a\\nb\": 1, \"a\\nb\": 2}\nstreams: {}\n";
    let padded = "clusters:\n  e:\n    bootstrapServers: a:1\n    properties: {\"a\\nb \": 1}\nstreams: {}\n";
    let conflict = "\
- streamId: s
  clusterMetadataList:
    - {clusterId: e, bootstrapServers: \"a\\nb\", topics: [t]}
- streamId: s2
  clusterMetadataList:
    - {clusterId: e, bootstrapServers: \"a\\rc\", topics: [t]}
";
    let file = "clusters:\n  e:\n    bootstrapServers: a:1\n    properties: {p: \"${file:no\\nsuch}\"}\nstreams: {}\n";
    for (text, shown, at) in [
        (twice, "property `a\\nb` is set twice", 4),
        (padded, "property name `a\\nb ` is empty or padded", 4),
        (conflict, "bootstrap.servers `a\\rc` here but `a\\nb`", 6),
        (file, "cannot read ./no?such", 4),
    ] {
        // error_line checks the message is one line.
        let (err, line) = error_line(text);
        assert!(err.to_string().contains(shown), "{err}");
        assert_eq!(line, at, "{err}");
    }
}

#[test]
fn a_repeated_stream_id_is_a_duplicate_stream() {
    let flink = format!(
        "{FLINK}{}",
        &FLINK[FLINK.find("- streamId: payments").unwrap()..]
    );
    let (err, line) = error_line(&flink);
    assert!(
        matches!(&err, MetadataError::DuplicateStream { stream, .. } if stream == "payments"),
        "{err}"
    );
    assert_eq!(line, 15);

    let rich = format!("{RICH}  orders:\n    clusters:\n      east: {{ topics: [x] }}\n");
    let (err, line) = error_line(&rich);
    assert!(
        matches!(&err, MetadataError::DuplicateStream { stream, .. } if stream == "orders"),
        "{err}"
    );
    assert_eq!(line, 24);
}

#[test]
fn a_stream_referencing_an_undefined_cluster_is_unknown_cluster() {
    let (err, line) = error_line(&RICH.replace(
        "      east: { topics: [orders] }",
        "      north: { topics: [orders] }",
    ));
    assert!(
        matches!(&err, MetadataError::UnknownCluster { stream, cluster, .. } if stream == "orders" && cluster == "north"),
        "{err}"
    );
    assert_eq!(line, 19);
}

#[test]
fn empty_lists_and_ids_are_invalid_where_they_are() {
    let cases: [(String, u32); 9] = [
        (
            FLINK.replace("topics: [orders, orders-v2]", "topics: []"),
            5,
        ),
        (FLINK.replace("- streamId: payments", "- streamId: ''"), 10),
        (
            FLINK.replace("- clusterId: west", "- clusterId: ' west'"),
            6,
        ),
        (
            FLINK.replace("topics: [payments]", "topics: ['bad topic']"),
            14,
        ),
        ("- streamId: s\n  clusterMetadataList: []\n".into(), 2),
        (RICH.replace("version: 1", "version: 2"), 2),
        (
            RICH.replace(
                "      east: { topics: [orders] }",
                "      east: { topics: [] }",
            ),
            19,
        ),
        (
            RICH.replace(
                "properties: { client.id: orders-west }",
                "properties: { bootstrap.servers: x:1 }",
            ),
            23,
        ),
        (
            RICH.replace(
                "    properties: { bootstrap",
                "    bootstrapServers: a:1\n    properties: { bootstrap",
            ),
            16,
        ),
    ];
    for (text, expected) in cases {
        let (err, line) = error_line(&text);
        assert!(matches!(err, MetadataError::Invalid { .. }), "{err}");
        assert_eq!(line, expected, "{err}");
    }
}

#[test]
fn a_cluster_listed_twice_in_one_stream_is_invalid() {
    let text = FLINK.replace("- clusterId: west", "- clusterId: east");
    let (err, line) = error_line(&text);
    assert!(matches!(err, MetadataError::Invalid { .. }), "{err}");
    assert_eq!(line, 6);
}

#[test]
fn an_unresolved_reference_points_at_its_value() {
    let (err, line) = error_line(&RICH.replace("${env:PASSWORD}", "${env:MISSING}"));
    assert!(
        matches!(err, MetadataError::UnresolvedReference { .. }),
        "{err}"
    );
    assert_eq!(line, 9);
}

#[test]
fn errors_after_inline_secrets_do_not_quote_the_file() {
    let text = "clusters:\n  c:\n    bootstrapServers: b:1\n    properties: {sasl.password: S3CRET-do-not-print}\n\
                streams: [oops\n";
    let (err, _) = error_line(text);
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
}

#[test]
fn an_empty_document_is_a_located_error() {
    let (err, line) = error_line("");
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
    assert_eq!(line, 1);
}

#[test]
fn an_empty_stream_list_is_no_streams() {
    assert!(parse("[]").unwrap().is_empty());
    assert!(parse("clusters: {}\nstreams: {}\n").unwrap().is_empty());
}

#[test]
fn hostile_documents_are_rejected_without_exhausting_the_process() {
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for level in b'b'..=b'j' {
        let prev = (level - 1) as char;
        let this = level as char;
        bomb.push_str(&format!("{this}: &{this} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let anchors =
        "- streamId: &s s\n  clusterMetadataList: []\n- streamId: *s\n  clusterMetadataList: []\n";
    for text in [bomb.as_str(), deep.as_str(), anchors] {
        let (err, _) = error_line(text);
        assert!(
            matches!(
                err,
                MetadataError::Syntax { .. } | MetadataError::Invalid { .. }
            ),
            "{err}"
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn mangled_valid_files_never_panic(cut in 0usize..400, insert in "[-:{}\\[\\]$ ,'\"\n#&*!a-z]{0,8}") {
        for base in [FLINK, RICH] {
            let mut at = cut.min(base.len());
            while !base.is_char_boundary(at) {
                at -= 1;
            }
            let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
            if let Err(e) = parse(&text) {
                let shown = e.to_string();
                prop_assert!(!shown.contains('\n'));
                prop_assert!(!shown.contains(SECRET));
            }
        }
    }
}

// --- the service -------------------------------------------------------------

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn load_serves_the_file_and_describe_filters_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    write(&path, FLINK);
    let service = FileMetadataService::load(&path).unwrap();
    let got = service
        .describe_streams(&["orders".into(), "missing".into()])
        .await
        .unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["orders"]);
    assert!(service.is_cluster_active("west").await.unwrap());
    assert!(!service.is_cluster_active("north").await.unwrap());
    assert_eq!(service.all_streams().await.unwrap().len(), 2);
}

#[test]
fn load_fails_on_a_missing_or_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    let err = FileMetadataService::load(&path).unwrap_err();
    assert!(matches!(err, MetadataError::Io { .. }), "{err}");
    write(&path, "- streamId: [\n");
    let err = FileMetadataService::watch(&path).unwrap_err();
    assert!(matches!(err, MetadataError::Syntax { .. }), "{err}");
}

#[tokio::test]
async fn a_manual_reload_applies_good_files_and_keeps_the_last_good_on_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    write(&path, FLINK);
    let service = FileMetadataService::load(&path).unwrap();
    let mut changes = service.changes().unwrap();
    let mut reloads = service.reloads();

    assert!(!service.reload().unwrap(), "same file, no change");
    assert_eq!(service.generation(), 0);

    write(&path, "- streamId: orders\n  clusterMetadataList: oops\n");
    let err = service.reload().unwrap_err();
    assert_eq!(service.last_error(), Some(err.clone()));
    assert_eq!(err.location().map(|l| l.line), Some(2));
    assert!(reloads.has_changed().unwrap());
    reloads.mark_unchanged();
    assert_eq!(
        service.all_streams().await.unwrap().len(),
        2,
        "last good kept"
    );
    assert!(!changes.has_changed().unwrap());

    write(
        &path,
        &FLINK.replace("- streamId: payments", "- streamId: refunds"),
    );
    assert!(service.reload().unwrap());
    assert_eq!(service.last_error(), None);
    assert_eq!(service.generation(), 1);
    assert_eq!(*changes.borrow_and_update(), 1);
    assert!(reloads.has_changed().unwrap());
    assert!(service.all_streams().await.unwrap().contains_key("refunds"));
}

#[tokio::test]
async fn a_closed_service_refuses_calls_and_stops_watching() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    write(&path, FLINK);
    let service = FileMetadataService::watch(&path).unwrap();
    service.close().await.unwrap();
    service.close().await.unwrap();
    assert!(service.watch.lock().unwrap().is_none());
    assert_eq!(
        service.all_streams().await.unwrap_err(),
        MetadataError::Closed
    );
    assert_eq!(
        service.describe_streams(&[]).await.unwrap_err(),
        MetadataError::Closed
    );
    assert_eq!(service.reload().unwrap_err(), MetadataError::Closed);
}

#[test]
fn dropping_a_watching_service_ends_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    write(&path, FLINK);
    let service = FileMetadataService::watch(&path).unwrap();
    let shared = Arc::downgrade(&service.shared);
    drop(service);
    // The thread held the only other reference; it is gone once the thread ended.
    assert!(shared.upgrade().is_none());
}

#[test]
fn debug_output_shows_the_path_but_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.yaml");
    std::fs::write(dir.path().join("pw"), format!("{SECRET}\n")).unwrap();
    write(
        &path,
        &RICH
            .replace("${env:PASSWORD}", "${file:pw}")
            .replace("${env:WEST_BOOTSTRAP}", "w:1"),
    );
    let service = FileMetadataService::load(&path).unwrap();
    assert_eq!(
        service.streams()["orders"].clusters["east"]
            .properties
            .get("sasl.password"),
        Some(SECRET)
    );
    let shown = format!("{service:?} {:?}", service.streams());
    assert!(shown.contains("streams.yaml"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}

#[test]
fn replaces_names_the_kafka_cluster_id_a_cluster_takes_over_in_both_layouts() {
    let rich = RICH.replace(
        "    bootstrapServers: east-1:9092\n",
        "    bootstrapServers: east-1:9092\n    replaces: Mk3OEYBSD34fcwNTJENDM2Q\n",
    );
    assert_ne!(rich, RICH);
    let streams = parse(&rich).unwrap();
    for s in streams.values() {
        if let Some(east) = s.clusters.get("east") {
            assert_eq!(east.replaces.as_deref(), Some("Mk3OEYBSD34fcwNTJENDM2Q"));
        }
        if let Some(west) = s.clusters.get("west") {
            assert_eq!(west.replaces, None);
        }
    }
    let flink = FLINK.replacen(
        "      bootstrapServers: west-1:9092\n",
        "      bootstrapServers: west-1:9092\n      replaces: old-west\n",
        1,
    );
    let streams = parse(&flink).unwrap();
    assert_eq!(
        streams["orders"].clusters["west"].replaces.as_deref(),
        Some("old-west")
    );
    // An empty id is refused where it is written.
    let (err, line) = error_line(&flink.replace("replaces: old-west", "replaces: ' '"));
    assert!(
        err.to_string().contains("replaced Kafka cluster.id"),
        "{err}"
    );
    assert_eq!(line, 8);
}

#[test]
fn a_file_reference_to_a_device_a_fifo_or_a_directory_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; (1 << 20) + 1]).unwrap();
    for target in [
        "/dev/zero".to_string(),
        fifo.display().to_string(),
        dir.path().display().to_string(),
        big.display().to_string(),
    ] {
        let text = FLINK.replacen(
            "      bootstrapServers: west-1:9092\n",
            &format!(
                "      bootstrapServers: west-1:9092\n      properties: {{sasl.password: \"${{file:{target}}}\"}}\n"
            ),
            1,
        );
        let (err, line) = error_line(&text);
        assert_eq!(line, 8, "{err}");
        assert!(err.to_string().contains("cannot read"), "{err}");
    }
    // The metadata file itself may be a pipe, but not a device without end.
    let err = read_metadata("/dev/zero").unwrap_err();
    assert!(err.to_string().contains("larger than"), "{err}");
    let err = read_metadata(dir.path()).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

const MIRRORED: &str = "\
clusters:
  east:
    bootstrapServers: east-1:9092
  west:
    bootstrapServers: west-1:9092
streams:
  orders:
    clusters:
      west:
        topics: [east.orders]
        mirrorOf:
          cluster: east
          translate: mm2
          failoverAfter: 60s
";

#[test]
fn mirror_of_is_read_in_the_richer_layout() {
    let streams = parse(MIRRORED).unwrap();
    let west = &streams["orders"].clusters["west"];
    let mirror = west.mirror_of.as_ref().expect("mirrorOf");
    assert_eq!(mirror.cluster, "east");
    assert_eq!(mirror.translate, crate::metadata::Translate::Mm2);
    assert_eq!(
        mirror.failover_after,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(
        mirror.source_topic("east.orders").as_deref(),
        Some("orders")
    );
    // The source's definition comes along (its offset syncs stay readable once it
    // leaves the streams), and is no part of the written form.
    let source = mirror
        .source_properties
        .as_ref()
        .expect("the source's settings");
    assert_eq!(source.get("bootstrap.servers"), Some("east-1:9092"));
    let written = serde_json::to_string(mirror).unwrap();
    assert!(!written.contains("east-1"), "{written}");
}

#[test]
fn mirror_of_is_read_in_flink_s_layout_too() {
    let text = "\
- streamId: orders
  clusterMetadataList:
    - clusterId: west
      bootstrapServers: west-1:9092
      topics: [orders]
      mirrorOf: {cluster: east, translate: identical, onMismatch: lowerBound}
";
    let streams = parse(text).unwrap();
    let mirror = streams["orders"].clusters["west"]
        .mirror_of
        .clone()
        .unwrap();
    assert_eq!(mirror.translate, crate::metadata::Translate::Identical);
    assert_eq!(mirror.on_mismatch, crate::metadata::OnMismatch::LowerBound);
}

#[test]
fn a_bad_mirror_of_is_a_located_one_line_error() {
    let cases = [
        // An undefined cluster.
        (
            MIRRORED.replace("cluster: east", "cluster: north"),
            "undefined cluster `north`",
            12,
        ),
        // A mirror of itself.
        (
            MIRRORED.replace("cluster: east", "cluster: west"),
            "mirror of itself",
            12,
        ),
        // A topic that does not follow MirrorMaker's names.
        (
            MIRRORED.replace("[east.orders]", "[orders]"),
            "`east.<topic>`",
            12,
        ),
        // A topic map naming a topic the entry does not read.
        (
            MIRRORED.replace(
                "translate: mm2",
                "translate: mm2\n          topics: {copy: orders}",
            ),
            "maps `copy`",
            12,
        ),
        // A word that is not a translation, a duration that is not one.
        (
            MIRRORED.replace("translate: mm2", "translate: copy"),
            "unknown variant",
            13,
        ),
        (MIRRORED.replace("60s", "soon"), "not a duration", 14),
    ];
    for (text, expected, line) in cases {
        let (err, at) = error_line(&text);
        assert!(err.to_string().contains(expected), "{expected} in {err}");
        assert_eq!(at, line, "{err}");
    }
}
