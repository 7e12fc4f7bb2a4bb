//! The Kubernetes manifests of `deploy/kubernetes/` fit the binary: the StatefulSet's
//! container arguments are accepted by `mck consume` for every replica's shard, its
//! shard count is its replica count, its probes and port are those of
//! `--metrics-addr`, its metadata file is the ConfigMap's key, mounted as a directory
//! (so updates reach the pod), and that file passes `mck validate`; the Deployment of
//! group mode likewise.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::mck;

fn manifest(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/kubernetes")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

/// `$(NAME)` references replaced as Kubernetes does, from `env`.
fn expand(arg: &str, env: &[(String, String)]) -> String {
    let mut out = arg.to_string();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    assert!(!out.contains("$("), "unresolved reference in {arg}");
    out
}

/// Checks a workload's pod: the metadata file is the ConfigMap's key on a directory
/// mount and passes `mck validate`, the probes and port are those of
/// `--metrics-addr`, and `mck consume` accepts the arguments (with `env` for their
/// `$(NAME)` references). Returns the arguments as written.
fn check_pod(pod: &Value, config: &Value, envs: &[Vec<(String, String)>]) -> Vec<String> {
    let container = &pod["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| str_of(a, "an argument").to_string())
        .collect();
    assert_eq!(args[0], "consume");
    let file = Path::new(&args[1]);
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| file.starts_with(str_of(&m["mountPath"], "mountPath")))
        .expect("the metadata file is on a mounted volume");
    assert!(
        mount.get("subPath").is_none(),
        "a subPath mount never sees ConfigMap updates"
    );
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mount's volume");
    assert_eq!(volume["configMap"]["name"], config["metadata"]["name"]);
    let key = file.file_name().unwrap().to_str().unwrap();
    let streams = str_of(&config["data"][key], "the ConfigMap's metadata file");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join(key);
    std::fs::write(&md, streams).unwrap();
    let out = mck().arg("validate").arg(&md).output().unwrap();
    assert!(
        out.status.success(),
        "mck validate refuses the ConfigMap's file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let at = args
        .iter()
        .position(|a| *a == "--metrics-addr")
        .expect("--metrics-addr");
    let port: u64 = args[at + 1].rsplit_once(':').unwrap().1.parse().unwrap();
    let named = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["containerPort"] == port)
        .expect("the metrics port is declared");
    for (probe, path) in [("readinessProbe", "/ready"), ("livenessProbe", "/live")] {
        assert_eq!(container[probe]["httpGet"]["path"], path);
        assert_eq!(container[probe]["httpGet"]["port"], named["name"]);
    }
    // The arguments pass mck consume's parser: run with the metadata file and any
    // volume moved to a temporary directory and a free port, each run stops at the
    // metadata file, which is not there (exit 1), never at the arguments (exit 2).
    let data = dir.path().join("data");
    let free = mck_testkit::free_ports(1).unwrap()[0];
    for env in envs {
        let run_args: Vec<String> = args
            .iter()
            .map(|a| expand(a, env))
            .map(|a| {
                a.replace(&args[1], dir.path().join("missing.yaml").to_str().unwrap())
                    .replace("/data", data.to_str().unwrap())
                    .replace(&format!(":{port}"), &format!(":{free}"))
            })
            .collect();
        let out = mck().args(&run_args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{run_args:?}\n{stderr}");
        assert!(stderr.contains("missing.yaml"), "{stderr}");
    }
    args
}

#[test]
fn the_deployment_runs_group_mode_mck_accepts_with_the_configmaps_metadata() {
    let deployment = manifest("deployment.yaml");
    let config = manifest("configmap.yaml");
    assert_eq!(deployment["kind"], "Deployment");
    let args = check_pod(
        &deployment["spec"]["template"]["spec"],
        &config,
        &[Vec::new()],
    );
    let at = args
        .iter()
        .position(|a| a == "--scale-out")
        .expect("--scale-out");
    assert_eq!(args[at + 1], "group");
    assert!(
        args.iter().any(|a| a == "--group"),
        "group mode needs --group"
    );
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        deployment["spec"]["template"]["metadata"]["labels"]
    );
}

#[test]
fn the_statefulset_runs_shards_mck_accepts_with_the_configmaps_metadata() {
    let set = manifest("statefulset.yaml");
    let config = manifest("configmap.yaml");
    let service = manifest("service.yaml");
    assert_eq!(set["kind"], "StatefulSet");
    assert_eq!(config["kind"], "ConfigMap");
    assert_eq!(
        service["spec"]["clusterIP"], "None",
        "a headless service for the StatefulSet"
    );
    assert_eq!(set["spec"]["serviceName"], service["metadata"]["name"]);
    let labels = &set["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the service selects the pods");
    }

    let replicas = set["spec"]["replicas"].as_u64().expect("replicas");
    let pod = &set["spec"]["template"]["spec"];
    let env_list = pod["containers"][0]["env"].as_array().expect("env");
    let shards = env_list
        .iter()
        .find(|e| e["name"] == "SHARDS")
        .map(|e| str_of(&e["value"], "SHARDS"))
        .expect("SHARDS");
    assert_eq!(shards, replicas.to_string(), "one shard per replica");
    let index = env_list
        .iter()
        .find(|e| e["name"] == "SHARD")
        .expect("SHARD");
    assert_eq!(
        index["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['apps.kubernetes.io/pod-index']"
    );
    // Every replica's shard.
    let envs: Vec<Vec<(String, String)>> = (0..replicas)
        .map(|i| {
            vec![
                ("SHARD".to_string(), i.to_string()),
                ("SHARDS".to_string(), shards.to_string()),
            ]
        })
        .collect();
    let args = check_pod(pod, &config, &envs);
    assert!(
        args.iter().any(|a| a == "shard:$(SHARD)/$(SHARDS)"),
        "{args:?}"
    );
}
