//! The Kubernetes manifests of `deploy/kubernetes/` and the Dockerfile fit the binary
//! and each other: the StatefulSet's container arguments are accepted by `mck
//! consume` for every replica's shard, the kustomization derives its shard count from
//! its replicas, its probes, port and Prometheus annotations are those of
//! `--metrics-addr`, its metadata file is the ConfigMap's key, mounted as a directory
//! (so updates reach the pod), and that file passes `mck validate` with the Secret's
//! files where it names them; the Deployment of group mode likewise. The image runs
//! as the pods' user and holds every library the binary links.

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

/// The container's volume mount that holds `path`, and its volume.
fn mounted<'a>(pod: &'a Value, path: &Path) -> (&'a Value, &'a Value) {
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| path.starts_with(str_of(&m["mountPath"], "mountPath")))
        .unwrap_or_else(|| panic!("{} is on no mounted volume", path.display()));
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mount's volume");
    (mount, volume)
}

/// The metadata file's `${file:…}` references to a mounted Secret, made real: each
/// file written under `dir` from the Secret's `stringData`, the reference moved there.
fn secret_files(text: &str, pod: &Value, secret: &Value, dir: &Path) -> String {
    let mut out = text.to_string();
    let mut rest = text;
    while let Some(at) = rest.find("${file:") {
        let from = &rest[at + "${file:".len()..];
        let path = &from[..from.find('}').expect("a closed reference")];
        rest = &from[path.len()..];
        let (mount, volume) = mounted(pod, Path::new(path));
        assert_eq!(
            volume["secret"]["secretName"], secret["metadata"]["name"],
            "{path} is a file of the Secret"
        );
        let key = Path::new(path)
            .strip_prefix(str_of(&mount["mountPath"], "mountPath"))
            .unwrap();
        let value = str_of(
            &secret["stringData"][key.to_str().unwrap()],
            "the Secret's key",
        );
        assert!(
            !text.contains(value),
            "the secret's value is in the ConfigMap"
        );
        let file = dir.join("secrets").join(key);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, value).unwrap();
        out = out.replace(path, file.to_str().unwrap());
    }
    out
}

/// Checks a workload's pod: the metadata file is the ConfigMap's key on a directory
/// mount and passes `mck validate` (with the Secret's files), the probes, port and
/// Prometheus annotations are those of `--metrics-addr`, the image is the Dockerfile's
/// and runs as its user, and `mck consume` accepts the arguments (with `env` for their
/// `$(NAME)` references). Returns the arguments as written.
fn check_pod(
    template: &Value,
    config: &Value,
    secret: &Value,
    envs: &[Vec<(String, String)>],
) -> Vec<String> {
    let pod = &template["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["imagePullPolicy"], "IfNotPresent",
        "a locally built image is used as it is"
    );
    let user = dockerfile_user();
    let security = &pod["securityContext"];
    assert_eq!(
        security["runAsUser"].as_u64(),
        Some(user),
        "the image's user"
    );
    assert_eq!(
        security["fsGroup"].as_u64(),
        Some(user),
        "volumes writable by it"
    );
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| str_of(a, "an argument").to_string())
        .collect();
    assert_eq!(args[0], "consume");
    let file = Path::new(&args[1]);
    let (mount, volume) = mounted(pod, file);
    assert!(
        mount.get("subPath").is_none(),
        "a subPath mount never sees ConfigMap updates"
    );
    assert_eq!(volume["configMap"]["name"], config["metadata"]["name"]);
    let key = file.file_name().unwrap().to_str().unwrap();
    let streams = str_of(&config["data"][key], "the ConfigMap's metadata file");
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join(key);
    std::fs::write(&md, secret_files(streams, pod, secret, dir.path())).unwrap();
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
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], port.to_string());
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
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
    let secret = manifest("secret.yaml");
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(secret["kind"], "Secret");
    let args = check_pod(
        &deployment["spec"]["template"],
        &config,
        &secret,
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
    let secret = manifest("secret.yaml");
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
    let args = check_pod(&set["spec"]["template"], &config, &secret, &envs);
    assert!(
        args.iter().any(|a| a == "shard:$(SHARD)/$(SHARDS)"),
        "{args:?}"
    );
}

/// The kustomization applies every manifest of shard mode and derives the shard count
/// from the StatefulSet's replicas; rendered by `kubectl kustomize` where kubectl is
/// installed, each pod's SHARDS is its replica count.
#[test]
fn the_kustomization_derives_the_shard_count_from_the_replicas() {
    let kustomization = manifest("kustomization.yaml");
    let set = manifest("statefulset.yaml");
    let name = &set["metadata"]["name"];
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| str_of(r, "a resource"))
        .collect();
    for file in [
        "configmap.yaml",
        "secret.yaml",
        "service.yaml",
        "statefulset.yaml",
    ] {
        assert!(resources.contains(&file), "{file} is applied");
    }
    assert_eq!(&kustomization["replicas"][0]["name"], name);
    let count = kustomization["replicas"][0]["count"]
        .as_u64()
        .expect("count");
    let replacement = &kustomization["replacements"][0];
    assert_eq!(replacement["source"]["kind"], "StatefulSet");
    assert_eq!(&replacement["source"]["name"], name);
    assert_eq!(replacement["source"]["fieldPath"], "spec.replicas");
    let container = str_of(
        &set["spec"]["template"]["spec"]["containers"][0]["name"],
        "name",
    );
    assert_eq!(
        replacement["targets"][0]["fieldPaths"][0],
        format!("spec.template.spec.containers.[name={container}].env.[name=SHARDS].value")
    );

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes");
    let rendered = match std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        }
        Err(e) => {
            eprintln!("kubectl is not installed ({e}): the rendering is not checked");
            return;
        }
    };
    let set: Value = rendered
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "StatefulSet")
        .expect("the rendering holds the StatefulSet");
    assert_eq!(set["spec"]["replicas"].as_u64(), Some(count));
    let env = set["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .clone();
    let shards = env.iter().find(|e| e["name"] == "SHARDS").expect("SHARDS");
    assert_eq!(shards["value"], count.to_string(), "one shard per replica");
}

/// The Dockerfile's runtime user.
fn dockerfile_user() -> u64 {
    let text = dockerfile();
    let user = text
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the image sets its user");
    user.split(':')
        .next()
        .unwrap()
        .trim()
        .parse()
        .expect("a numeric user")
}

fn dockerfile() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Dockerfile"))
        .expect("the Dockerfile")
}

/// The Dockerfile builds mck in the official Rust image of the workspace's oldest
/// supported Rust, without the demo, and its slim runtime stage installs a package
/// for every library the binary links beyond glibc.
#[test]
fn the_dockerfile_builds_mck_into_a_slim_image_with_what_it_links() {
    let text = dockerfile();
    let workspace =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml"))
            .unwrap();
    let msrv = workspace
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    let stages: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(
        stages[0].starts_with(&format!("FROM rust:{msrv}-")),
        "{stages:?}"
    );
    assert!(stages[1].contains("-slim"), "{stages:?}");
    assert!(text.contains("--path crates/mck --no-default-features"));
    assert!(text.contains("COPY --from=build /out/bin/mck /usr/local/bin/mck"));
    assert!(text.contains(r#"ENTRYPOINT ["mck"]"#));
    let runtime = &text[text.find(stages[1]).unwrap()..];
    assert!(
        runtime.contains("ca-certificates"),
        "TLS and OIDC need the CAs"
    );
    let out = std::process::Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_mck")])
        .output()
        .expect("readelf (binutils)");
    let dynamic = String::from_utf8(out.stdout).unwrap();
    // What glibc's own package brings, and the Debian package of each other library.
    let glibc = [
        "libc.so.6",
        "libm.so.6",
        "ld-linux-x86-64.so.2",
        "libpthread.so.0",
        "libdl.so.2",
    ];
    let packages = [("libz.so.1", "zlib1g"), ("libgcc_s.so.1", "libgcc-s1")];
    let mut needed = 0;
    for line in dynamic.lines().filter(|l| l.contains("(NEEDED)")) {
        let lib = line.rsplit('[').next().unwrap().trim_end_matches(']');
        needed += 1;
        if glibc.contains(&lib) {
            continue;
        }
        let package = packages
            .iter()
            .find(|(l, _)| *l == lib)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("mck links {lib}: which package brings it?"));
        assert!(
            runtime.contains(package),
            "the runtime image lacks {package} ({lib})"
        );
    }
    assert!(needed > 0, "no NEEDED entry read: {dynamic}");
}
