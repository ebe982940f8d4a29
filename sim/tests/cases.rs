//! Named cases that run one after another inside one test (the rxe pingpong chain, the perftest batches):
//! which ones a run keeps, and running each even when an earlier one failed.

/// A case: its name and the function that runs and checks it (panicking on failure).
pub type Case = (&'static str, fn());

/// The cases whose name contains one of the comma-separated words of the environment variable `var`; all of
/// them when it is unset.
pub fn selected<'a>(var: &str, cases: &'a [Case]) -> Vec<&'a Case> {
    let only = std::env::var(var).ok();
    cases
        .iter()
        .filter(|c| only.as_deref().map_or(true, |o| o.split(',').any(|w| c.0.contains(w.trim()))))
        .collect()
}

/// Run each case in turn, each even when an earlier one panicked (its whole message is printed as it
/// happens), and return those that did, each with the first lines of its message: a long log shown only in
/// part still ends with why each case failed.
pub fn run_each(cases: &[&Case]) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, case) in cases {
        let t0 = std::time::Instant::now();
        eprintln!("=== case {name}");
        match std::panic::catch_unwind(*case) {
            Ok(()) => eprintln!("=== case {name}: ok, {:.1} s", t0.elapsed().as_secs_f64()),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| e.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                let head: Vec<&str> = msg.lines().take(4).collect();
                failed.push(format!("{name}: {}", head.join(" | ")));
            }
        }
    }
    failed
}
