//! The markdown tables of a run.

use super::super::median;
use super::BlackholeArgs;
use super::library::Round;

/// Prints the markdown tables.
pub(super) fn print_tables(
    args: &BlackholeArgs,
    pass: &[Round],
    hole: &[Round],
    mck_pass: &[f64],
    mck_hole: &[f64],
) {
    let date = super::super::utc_minute();
    let load = super::super::load_average();
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "blackhole, {date}, {cores} cores, load average at the end {load}; A: {} records of {} B \
         in 4 partitions, B (behind the proxy): {} records in 1 partition; {} rounds of each kind, alternating",
        args.records,
        args.value_size,
        args.b_records,
        pass.len()
    );
    println!();
    let all = |v: &[Round], f: fn(&Round) -> f64, scale: f64, digits: usize| {
        v.iter()
            .map(|r| format!("{:.*}", digits, f(r) * scale))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let med = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    let best =
        |v: &[Round], f: fn(&Round) -> f64| v.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    let worst =
        |v: &[Round], f: fn(&Round) -> f64| v.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    let rate = |r: &Round| r.rate;
    let close = |r: &Round| r.close;
    let rtd = |r: &Round| r.runtime_drop;
    println!("| A's records/s | median | best | rounds |");
    println!("|---|---|---|---|");
    println!(
        "| (a) B passes | {:.0} | {:.0} | {} |",
        med(pass, rate),
        best(pass, rate),
        all(pass, rate, 1.0, 0)
    );
    println!(
        "| (b) B blackholed | {:.0} | {:.0} | {} |",
        med(hole, rate),
        best(hole, rate),
        all(hole, rate, 1.0, 0)
    );
    println!(
        "| **(b) / (a)** (target ≥ 0.95) | **{:.3}** | {:.3} | |",
        med(hole, rate) / med(pass, rate),
        best(hole, rate) / best(pass, rate)
    );
    // Each blackhole round against the pass round run beside it: the load on the shared
    // cores drifts more between round pairs than within one.
    let pairs: Vec<f64> = hole
        .iter()
        .zip(pass)
        .map(|(h, p)| h.rate / p.rate)
        .collect();
    println!(
        "| (b) / (a), round by round | {:.3} | {:.3} | {} |",
        median(pairs.clone()),
        pairs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        pairs
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!("| shutdown | median | worst | rounds |");
    println!("|---|---|---|---|");
    let ms = |label: &str, v: &[Round], f: fn(&Round) -> f64| {
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {} |",
            med(v, f) * 1e3,
            worst(v, f) * 1e3,
            all(v, f, 1e3, 0)
        );
    };
    ms("library, B blackholed: close()", hole, close);
    ms(
        "library, B blackholed: runtime drop after close()",
        hole,
        rtd,
    );
    ms("library, B passes: close()", pass, close);
    ms("library, B passes: runtime drop after close()", pass, rtd);
    let secs_row = |label: &str, v: &[f64]| {
        if v.is_empty() {
            return;
        }
        let list = v
            .iter()
            .map(|s| format!("{:.0}", s * 1e3))
            .collect::<Vec<_>>()
            .join(", ");
        let worst = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {list} |",
            median(v.to_vec()) * 1e3,
            worst * 1e3
        );
    };
    secs_row(
        &format!(
            "mck consume, B blackholed {} ms before: SIGINT to exit",
            args.mck_hold_ms
        ),
        mck_hole,
    );
    secs_row("mck consume, B passes: SIGINT to exit", mck_pass);
}
