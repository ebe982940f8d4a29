//! A structural clock-domain-crossing check of emitted Verilog: Yosys flattens the design (`proc; flatten;
//! memory -nomap`) and writes its netlist as JSON; this module gives every flip-flop and memory the clock
//! domain of its clock input (a top-level clock port) and follows each register's inputs back through the
//! combinational logic to the registers, memories and ports they come from. Only three crossings are
//! allowed, the ones `super::cdc` is built of:
//!
//! * into a synchroniser's first flop (a register named `cdc_s1`), straight from one register of the other
//!   domain (no logic between: two bits changing together must not be sampled through a gate);
//! * from the distributed RAM of an `AsyncFifo` (a memory named `ram`, written in one clock and read
//!   asynchronously in the other: the pointers that guard it cross through synchronisers);
//! * into the asynchronous reset of a `ResetSync` flop (`cdc_rst_s1`, `cdc_rst_s2`).
//!
//! Top-level input ports are given their domain by the caller (a port of the CMAC's user side is in the
//! core clock, one of the QDMA's in the PCIe clock; a pin from the board is asynchronous and must meet a
//! synchroniser first). Any other path from one domain to another is reported with the names on it.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::rc::Rc;

/// A clock domain: the name of the top-level clock port, or `async` for a pin with no clock.
pub type Domain = String;

/// What the check found.
#[derive(Debug, Default)]
pub struct CdcReport {
    /// Registers (flip-flop bits) per domain.
    pub flops: BTreeMap<Domain, usize>,
    /// Allowed crossings seen: (kind, destination name).
    pub crossings: BTreeSet<(String, String)>,
    /// Everything else that crosses: one line each.
    pub violations: Vec<String>,
}

struct Cell {
    name: String,
    kind: String,
    /// port -> bits
    conns: HashMap<String, Vec<Bit>>,
    /// ports that are outputs
    outputs: BTreeSet<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Bit {
    Net(u64),
    Const,
}

fn bits(v: &Value) -> Vec<Bit> {
    v.as_array()
        .map(|a| a.iter().map(|b| b.as_u64().map_or(Bit::Const, Bit::Net)).collect())
        .unwrap_or_default()
}

fn is_flop(kind: &str) -> bool {
    let k = kind.trim_start_matches('$').to_ascii_lowercase();
    k.contains("dff") || k.contains("latch") || k.starts_with("_sr_")
}

/// Run the check on `verilog` (top module `top`); `ports` gives the domain of each top-level input (by
/// name; a missing one is an error), `clocks` the clock ports.
///
/// `opaque` names modules (with their one clock port) to keep as black boxes: a single-clock synchronous
/// block (the RNIC core: one `clock` port) is a register of that clock's domain for the check, so its
/// inputs must come from that domain and its outputs count as that domain's; this keeps the walk to the
/// glue (seconds instead of minutes of flattening the core).
pub fn check(verilog: &str, clocks: &[&str], ports: &dyn Fn(&str) -> Option<Domain>, opaque: &[(&str, &str)], work: &Path) -> Result<CdcReport> {
    std::fs::create_dir_all(work)?;
    let v = work.join("cdc.v");
    let j = work.join("cdc.json");
    std::fs::write(&v, stub_opaque(verilog, opaque))?;
    let script = format!(
        "read_verilog {}; hierarchy -top top; {} proc; flatten; memory -nomap; opt_clean; write_json {}",
        v.display(),
        "",
        j.display()
    );
    let out = Command::new("yosys").args(["-q", "-p", &script]).output().context("running yosys")?;
    if !out.status.success() {
        bail!("yosys failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = std::fs::read_to_string(&j)?;
    let _ = std::fs::remove_file(&j);
    let json: Value = serde_json::from_str(&text)?;
    drop(text);
    // the walk recurses along combinational paths, which are long in a flattened design: a deep stack
    let clocks: Vec<String> = clocks.iter().map(|c| c.to_string()).collect();
    let opaque: Vec<(String, String)> = opaque.iter().map(|(m, c)| (m.to_string(), c.to_string())).collect();
    let doms: HashMap<String, Domain> = json["modules"]["top"]["ports"]
        .as_object()
        .map(|ps| ps.keys().filter_map(|p| ports(p).map(|d| (p.clone(), d))).collect())
        .unwrap_or_default();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let cs: Vec<&str> = clocks.iter().map(|c| c.as_str()).collect();
            analyse(&json, &cs, &|p| doms.get(p).cloned(), &opaque)
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("the CDC walk panicked"))?
}

fn analyse(json: &Value, clocks: &[&str], ports: &dyn Fn(&str) -> Option<Domain>, opaque: &[(String, String)]) -> Result<CdcReport> {
    let top = &json["modules"]["top"];
    if top.is_null() {
        bail!("no module top in the netlist");
    }
    // names of nets (the shortest hierarchical name of each bit), for messages and the allowed crossings
    let mut name_of: HashMap<Bit, String> = HashMap::new();
    let mut all_names: HashMap<Bit, Vec<String>> = HashMap::new();
    if let Some(nn) = top["netnames"].as_object() {
        for (n, o) in nn {
            for (i, b) in bits(&o["bits"]).into_iter().enumerate() {
                let full = format!("{n}[{i}]");
                all_names.entry(b).or_default().push(full.clone());
                let e = name_of.entry(b).or_insert_with(|| full.clone());
                let auto = |s: &str| s.starts_with('$');
                if (auto(e) && !auto(&full)) || (auto(e) == auto(&full) && full.len() < e.len()) {
                    *e = full;
                }
            }
        }
    }
    // a bit whose names include `pat` (a register is known by every name of its output)
    let named = |b: Option<&Bit>, pat: &str| b.and_then(|b| all_names.get(b)).is_some_and(|ns| ns.iter().any(|n| n.contains(pat)));
    let nm = |b: &Bit| name_of.get(b).cloned().unwrap_or_else(|| format!("{b:?}"));
    // top-level ports
    let mut port_dom: HashMap<Bit, Domain> = HashMap::new();
    let mut clock_of: HashMap<Bit, Domain> = HashMap::new();
    if let Some(ps) = top["ports"].as_object() {
        for (n, o) in ps {
            if o["direction"] != "input" {
                continue;
            }
            let bs = bits(&o["bits"]);
            if clocks.contains(&n.as_str()) {
                for b in bs {
                    clock_of.insert(b, n.clone());
                }
                continue;
            }
            let d = ports(n).with_context(|| format!("input port {n} has no domain"))?;
            for b in bs {
                port_dom.insert(b, d.clone());
            }
        }
    }
    let mut cells = Vec::new();
    if let Some(cs) = top["cells"].as_object() {
        for (n, c) in cs {
            let kind = c["type"].as_str().unwrap_or("").to_string();
            let mut conns = HashMap::new();
            let mut outputs = BTreeSet::new();
            if let Some(pc) = c["connections"].as_object() {
                for (p, b) in pc {
                    conns.insert(p.clone(), bits(b));
                }
            }
            if let Some(pd) = c["port_directions"].as_object() {
                for (p, d) in pd {
                    if d == "output" {
                        outputs.insert(p.clone());
                    }
                }
            }
            cells.push(Cell { name: n.clone(), kind, conns, outputs });
        }
    }
    // drivers: bit -> (cell index, output port)
    let mut driver: HashMap<Bit, usize> = HashMap::new();
    for (i, c) in cells.iter().enumerate() {
        for p in &c.outputs {
            for b in &c.conns[p] {
                driver.insert(*b, i);
            }
        }
    }
    // the clock port of an opaque (black-box) cell
    let opaque_clock = |c: &Cell| opaque.iter().find(|(m, _)| c.kind.trim_start_matches('\\') == m.as_str()).map(|(_, cp)| cp.as_str());
    let mut rep = CdcReport::default();
    // the domain of each sequential cell (flop or memory write side)
    let mut dom: HashMap<usize, Domain> = HashMap::new();
    for (i, c) in cells.iter().enumerate() {
        let clk = if is_flop(&c.kind) {
            c.conns.get("CLK").cloned()
        } else if c.kind.starts_with("$mem") {
            // a ROM (no write port) is a function of its address
            match c.conns.get("WR_CLK") {
                Some(w) if !w.is_empty() => Some(w.clone()),
                _ => continue,
            }
        } else if let Some(cp) = opaque_clock(c) {
            Some(c.conns.get(cp).cloned().unwrap_or_default())
        } else {
            continue;
        };
        let Some(clk) = clk else {
            rep.violations.push(format!("{} ({}): a latch or a flop without a clock", c.name, c.kind));
            continue;
        };
        let ds: BTreeSet<Domain> = clk.iter().filter_map(|b| clock_of.get(b).cloned()).collect();
        if ds.len() != 1 {
            rep.violations.push(format!("{} ({}): clocked by {:?}, not by one top-level clock", c.name, c.kind, clk.iter().map(&nm).collect::<Vec<_>>()));
            continue;
        }
        let d = ds.into_iter().next().unwrap();
        if is_flop(&c.kind) {
            *rep.flops.entry(d.clone()).or_default() += c.conns.get("Q").map_or(0, |q| q.len());
        }
        dom.insert(i, d);
    }
    // Each bit's sources, summarised: for each (domain, kind, through logic) one example. The domains are
    // few, so a bit carries at most a dozen entries however wide its cone.
    let mut doms: Vec<Domain> = clock_of.values().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    for d in port_dom.values() {
        if !doms.contains(d) {
            doms.push(d.clone());
        }
    }
    let di = |d: &Domain| doms.iter().position(|x| x == d).unwrap() as u8;
    let dom_i: HashMap<usize, u8> = dom.iter().map(|(k, d)| (*k, di(d))).collect();
    let port_i: HashMap<Bit, u8> = port_dom.iter().map(|(b, d)| (*b, di(d))).collect();
    let clock_i: HashMap<Bit, u8> = clock_of.iter().map(|(b, d)| (*b, di(d))).collect();
    let mut memo: HashMap<Bit, Rc<Vec<Src>>> = HashMap::new();
    for (i, c) in cells.iter().enumerate() {
        let Some(&d) = dom_i.get(&i) else { continue };
        let q = if is_flop(&c.kind) { c.conns.get("Q").and_then(|q| q.first()) } else { None };
        let out_name = q.map(&nm).unwrap_or_else(|| c.name.clone());
        let clock_port = opaque_clock(c);
        for (p, xs) in &c.conns {
            if c.outputs.contains(p) || p == "CLK" || p == "WR_CLK" || p.starts_with("RD_") || Some(p.as_str()) == clock_port {
                continue;
            }
            let reset = p == "ARST" || p == "SET" || p == "CLR" || p == "AD" || p == "ALOAD";
            for &x in xs {
                let srcs = sources(x, &cells, &driver, &dom_i, &port_i, &clock_i, &mut memo);
                for s in srcs.iter() {
                    if s.dom == d {
                        continue;
                    }
                    let what = match s.what {
                        What::Bit(b) => nm(&b),
                        What::Cell(k) => cells[k].name.clone(),
                    };
                    let syncer = named(q, "cdc_s1");
                    let rst = named(q, "cdc_rst_s");
                    let ram = s.kind == Kind::Ram;
                    if ram && what.contains("ram") && !named(q, "cdc_s") {
                        rep.crossings.insert(("AsyncFifo RAM read".into(), what.clone()));
                    } else if syncer && !s.logic && !ram {
                        rep.crossings.insert(("synchroniser".into(), strip_bit(&out_name)));
                    } else if rst && reset {
                        rep.crossings.insert(("reset synchroniser".into(), strip_bit(&out_name)));
                    } else {
                        rep.violations.push(format!(
                            "{out_name} ({}, input {p}) from {what} ({}){}",
                            doms[d as usize],
                            doms[s.dom as usize],
                            if s.logic { " through logic" } else { "" }
                        ));
                    }
                }
            }
        }
    }
    // outputs to the IPs: each in its port's domain (a pin with no clock, `async`, takes anything)
    if let Some(ps) = top["ports"].as_object() {
        for (n, o) in ps {
            if o["direction"] != "output" {
                continue;
            }
            let Some(d) = ports(n).filter(|d| d != "async") else { continue };
            let Some(d) = doms.iter().position(|x| *x == d) else { continue };
            for b in bits(&o["bits"]) {
                for s in sources(b, &cells, &driver, &dom_i, &port_i, &clock_i, &mut memo).iter() {
                    if s.dom as usize == d || doms[s.dom as usize] == "async" {
                        continue;
                    }
                    let what = match s.what {
                        What::Bit(b) => nm(&b),
                        What::Cell(k) => cells[k].name.clone(),
                    };
                    if s.kind == Kind::Ram && what.contains("ram") {
                        rep.crossings.insert(("AsyncFifo RAM read".into(), what));
                    } else {
                        rep.violations.push(format!("output {n} ({}) from {what} ({}){}", doms[d], doms[s.dom as usize], if s.logic { " through logic" } else { "" }));
                    }
                }
            }
        }
    }
    rep.violations.sort();
    rep.violations.dedup();
    Ok(rep)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Flop,
    Ram,
    Port,
}

#[derive(Clone, Copy, Debug)]
enum What {
    Bit(Bit),
    Cell(usize),
}

/// One source of a bit: its domain (an index), what it is (a register, a memory read asynchronously, a
/// port), whether logic lies between, and an example of it.
#[derive(Clone, Copy, Debug)]
struct Src {
    dom: u8,
    kind: Kind,
    logic: bool,
    what: What,
}

/// The sources of bit `b` (memoised; a combinational loop is cut where it closes).
fn sources(
    b: Bit,
    cells: &[Cell],
    driver: &HashMap<Bit, usize>,
    dom: &HashMap<usize, u8>,
    port_dom: &HashMap<Bit, u8>,
    clock_of: &HashMap<Bit, u8>,
    memo: &mut HashMap<Bit, Rc<Vec<Src>>>,
) -> Rc<Vec<Src>> {
    if let Some(s) = memo.get(&b) {
        return s.clone();
    }
    let r: Vec<Src> = if let Some(&d) = port_dom.get(&b).or_else(|| clock_of.get(&b)) {
        vec![Src { dom: d, kind: Kind::Port, logic: false, what: What::Bit(b) }]
    } else if let Some(&ci) = driver.get(&b) {
        let c = &cells[ci];
        if is_flop(&c.kind) || (!c.kind.starts_with('$') && dom.contains_key(&ci)) {
            dom.get(&ci).map(|&d| vec![Src { dom: d, kind: Kind::Flop, logic: false, what: What::Bit(b) }]).unwrap_or_default()
        } else {
            memo.insert(b, Rc::new(Vec::new())); // cut combinational loops
            let mut v: Vec<Src> = Vec::new();
            let add = |v: &mut Vec<Src>, s: Src| {
                if !v.iter().any(|x| x.dom == s.dom && x.kind == s.kind && x.logic == s.logic) {
                    v.push(s);
                }
            };
            let ins: Vec<&Vec<Bit>> = if c.kind.starts_with("$mem") {
                // asynchronous read: the data is the write side's; the address and enable the reader's (a ROM
                // has no write side)
                if let Some(&d) = dom.get(&ci) {
                    add(&mut v, Src { dom: d, kind: Kind::Ram, logic: false, what: What::Cell(ci) });
                }
                ["RD_ADDR", "RD_EN"].iter().filter_map(|p| c.conns.get(*p)).collect()
            } else {
                c.conns.iter().filter(|(p, _)| !c.outputs.contains(*p)).map(|(_, x)| x).collect()
            };
            for xs in ins {
                for &x in xs {
                    for s in sources(x, cells, driver, dom, port_dom, clock_of, memo).iter() {
                        add(&mut v, Src { logic: true, ..*s });
                    }
                }
            }
            v
        }
    } else {
        Vec::new() // a constant or an undriven bit
    };
    let r = Rc::new(r);
    memo.insert(b, r.clone());
    r
}

/// `verilog` with each opaque module reduced to a black box (its port declarations only) and the modules
/// below it (rust-hdl names them `parent$child`) removed: Yosys then never reads the core (minutes).
fn stub_opaque(verilog: &str, opaque: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(verilog.len());
    let mut skip = false;
    let mut stub = false;
    for line in verilog.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("module ") {
            let name = rest.split('(').next().unwrap_or("").trim();
            stub = opaque.iter().any(|(m, _)| name == *m);
            skip = !stub && opaque.iter().any(|(m, _)| name.starts_with(&format!("{m}$")));
            if stub {
                out.push_str("(* blackbox *)\n");
                out.push_str(line);
                out.push('\n');
                continue;
            }
        }
        if stub {
            if t.starts_with("input") || t.starts_with("output") {
                out.push_str(&line.replace("output reg", "output wire"));
                out.push('\n');
            } else if t.starts_with("endmodule") {
                out.push_str("endmodule\n");
                stub = false;
            }
            continue;
        }
        if !skip {
            out.push_str(line);
            out.push('\n');
        }
        if t.starts_with("endmodule") {
            skip = false;
        }
    }
    out
}

/// A register's name without its bit index (`a.b$q[3]` -> `a.b$q`).
fn strip_bit(n: &str) -> String {
    match n.rfind('[') {
        Some(i) if n.ends_with(']') => n[..i].to_string(),
        _ => n.to_string(),
    }
}
