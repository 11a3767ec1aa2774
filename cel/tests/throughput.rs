//! Rough throughput, for the record: `cargo test --release -p k8s-cel
//! --test throughput -- --ignored --nocapture`.

use std::time::Instant;

use k8s_cel::{Bindings, Program};
use serde_json::json;

#[test]
#[ignore = "a measurement, not a check; run in release"]
fn typical_rules() {
    let object = json!({
        "spec": {
            "replicas": 3,
            "containers": (0..20).map(|i| json!({
                "name": format!("c{i}"),
                "image": format!("registry.example.com/app:{i}"),
                "resources": {"limits": {"memory": "512Mi"}},
                "ports": [{"containerPort": 8080 + i}],
            })).collect::<Vec<_>>(),
        }
    });
    let vars = Bindings::new()
        .with_json("self", &object)
        .with_json("oldSelf", &object);
    for rule in [
        "self.spec.replicas <= 10",
        "self.spec.replicas >= oldSelf.spec.replicas",
        "self.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
        "self.spec.containers.all(c, quantity(c.resources.limits.memory).isLessThan(quantity('4Gi')))",
        "self.spec.containers.map(c, c.name).all(n, format.dns1123Label().validate(n) == optional.none())",
    ] {
        let program = Program::compile(rule).unwrap();
        let n = 20_000;
        let started = Instant::now();
        let mut cost = 0;
        for _ in 0..n {
            cost = program.evaluate(&vars).unwrap().cost;
        }
        let per = started.elapsed() / n;
        eprintln!("{per:>10?} per evaluation, cost {cost:>5}: {rule}");
    }
    let started = Instant::now();
    for _ in 0..1000 {
        Program::compile(
            "self.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
        )
        .unwrap();
    }
    eprintln!("{:>10?} per compile", started.elapsed() / 1000);
}
