//! Builds a Verilator model of each block a harness drives (`MODELS`) and a safe Rust wrapper for each.
//!
//! For each of those blocks (`fpga::block(name)`): write its Verilog, run `verilator --cc` with its own `--prefix`,
//! read the generated file list from `V<name>_classes.mk`, generate an `extern "C"` shim from the top
//! module's port list, and compile it with `cc` (per-cycle code at -O2, fast even in debug test builds; run-once `__Slow` code at -O0). The Verilator
//! runtime is compiled once. A model whose Verilog did not change (hash) is not rebuilt.
//!
//! Port names: rust-hdl's `s_axis$tdata` is `s_axis__024tdata` in C++ and `s_axis_tdata` in Rust.

use anyhow::{bail, Context, Result};
use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference top (see `sim/ref/README.md`).
const REF_TOP: &str = "ref/rnic-1edd0f5.v";

struct Port {
    name: String,
    input: bool,
    width: usize,
}

fn ports_of_top(v: &str) -> Result<Vec<Port>> {
    let start = v.find("module top(").context("no `module top(` in the Verilog")?;
    let body = &v[start..];
    let end = body.find("endmodule").context("no endmodule")?;
    let mut ports = Vec::new();
    for line in body[..end].lines() {
        let t = line.trim();
        let (input, rest) = if let Some(r) = t.strip_prefix("input wire") {
            (true, r)
        } else if let Some(r) = t.strip_prefix("output reg") {
            (false, r)
        } else if let Some(r) = t.strip_prefix("output wire") {
            (false, r)
        } else {
            continue;
        };
        let rest = rest.trim().trim_end_matches(';').trim();
        let (width, name) = if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').context("bad range")?;
            let hi: usize = r[..close].split(':').next().unwrap().trim().parse()?;
            (hi + 1, r[close + 1..].trim())
        } else {
            (1, rest)
        };
        ports.push(Port { name: name.to_string(), input, width });
    }
    if ports.is_empty() {
        bail!("top has no ports");
    }
    Ok(ports)
}

fn classes(mk: &Path) -> Result<Vec<String>> {
    // The model's own files: VM_CLASSES_* and VM_SUPPORT_* (the runtime's VM_GLOBAL_* is built once).
    let text = std::fs::read_to_string(mk).with_context(|| format!("reading {}", mk.display()))?;
    let mut files = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let t = line.trim();
        if t.contains("+=") {
            in_list = t.starts_with("VM_CLASSES_") || t.starts_with("VM_SUPPORT_");
            continue;
        }
        if in_list && !t.is_empty() && !t.starts_with('#') {
            files.push(t.trim_end_matches('\\').trim().to_string());
        } else {
            in_list = false;
        }
    }
    files.retain(|f| !f.is_empty());
    if files.is_empty() {
        bail!("no model files listed in {}", mk.display());
    }
    Ok(files)
}

/// Link a static library that an earlier run of this script compiled into OUT_DIR.
fn link_cached(out: &Path, lib: &str) {
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static={lib}");
    println!("cargo:rustc-link-lib=dylib=stdc++");
}

/// Verilator 5 evaluates the model's input-driven logic (its `ico` region) on every `eval`, first of all
/// on the rising-edge `eval`, whose only changed input is the clock: about a tenth of the whole RNIC's time.
/// The shim knows whether an input other than the clock changed since the last `eval` (`dirty`); this patch
/// makes the region's first trigger also require that, so an `eval` with the same inputs skips it. The
/// region's other triggers (the feedback signals it re-evaluates until they settle) are untouched. With a
/// Verilator whose code does not have the line, nothing is patched and every `eval` runs the region.
fn skip_idle_input_settle(mdir: &Path, name: &str) -> Result<()> {
    const LINE: &str = "__VicoTriggered.at(0U) = (0U == vlSelf->__VicoIterCount);";
    for e in std::fs::read_dir(mdir)? {
        let path = e?.path();
        if path.extension().and_then(|x| x.to_str()) != Some("cpp") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        if text.contains(LINE) {
            let patched = text.replace(LINE, &format!("__VicoTriggered.at(0U) = (0U == vlSelf->__VicoIterCount) && !vl_skip_ico_{name};"));
            std::fs::write(&path, format!("extern thread_local bool vl_skip_ico_{name};\n{patched}"))?;
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let vroot = std::env::var("VERILATOR_ROOT").unwrap_or_else(|_| "/usr/share/verilator".into());
    let inc = PathBuf::from(&vroot).join("include");
    println!("cargo:rerun-if-env-changed=VERILATOR_ROOT");
    for dir in ["../rtl/src", "../fpga/src", "../testbench/src"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    if Command::new("verilator").arg("--version").output().is_err() {
        bail!("verilator is not installed: run `sudo apt-get install verilator` (the README's commands do it for you)");
    }

    let mut rust = String::from("// Generated by sim/build.rs: one module per Verilator model.\n");
    let mut shim_build = cc::Build::new();
    shim_build.cpp(true).opt_level(2).debug(false).flag("-std=c++17").warnings(false);
    // The models are built for the machine that runs them: about 10 % faster than the generic x86-64 target.
    shim_build.flag_if_supported("-march=native");
    for d in ["VM_TRACE=1", "VM_TRACE_VCD=1", "VM_COVERAGE=0", "VM_SC=0"] {
        let (k, v) = d.split_once('=').unwrap();
        shim_build.define(k, v);
    }
    shim_build.include(&inc).include(inc.join("vltstd"));

    // Only the blocks a harness drives get a Verilator model; every block is linted and synthesised by the
    // gates (fpga/tests/gates.rs). Each model costs a C++ build, the top's the most.
    // the blocks, the board shell (the board top between its vendor IPs: `sim::board`), and the reference top:
    // the whole RNIC as emitted before the Responder and Completer were split into stages (`sim/ref/`), compared
    // with today's by completions, memory and frames (`sim/tests/stage_equivalence.rs`)
    const MODELS: &[&str] =
        &["icrc_engine", "key_cache", "psn_check", "qp_context", "rnic", "rx_parse", "tx_packet_build", "board_shell", "rnic_ref"];
    let ref_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(REF_TOP);
    println!("cargo:rerun-if-changed={}", ref_path.display());
    for &model in MODELS {
        let block = if model == "board_shell" {
            fpga::Emitted { name: "board_shell", verilog: fpga::board::shell::verilog(), depth_budget: None }
        } else if model == "rnic_ref" {
            let verilog = std::fs::read_to_string(&ref_path).with_context(|| format!("reading {}", ref_path.display()))?;
            fpga::Emitted { name: "rnic_ref", verilog, depth_budget: None }
        } else {
            fpga::block(model).with_context(|| format!("no block {model} in fpga::blocks()"))?
        };
        let name = block.name;
        let prefix = format!("V{name}");
        let mdir = out.join(name);
        let vfile = out.join(format!("{name}.v"));
        let mut h = DefaultHasher::new();
        block.verilog.hash(&mut h);
        include_str!("build.rs").hash(&mut h); // a change to the shim generator rebuilds too
        let hash = format!("{:016x}", h.finish());
        let stamp = mdir.join("hash");
        let fresh = std::fs::read_to_string(&stamp).map(|s| s == hash).unwrap_or(false);
        if !fresh {
            let _ = std::fs::remove_dir_all(&mdir);
            std::fs::create_dir_all(&mdir)?;
            std::fs::write(&vfile, &block.verilog)?;
            let st = Command::new("verilator")
                .args(["--cc", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert", "-Wno-fatal"])
                .args(["-Wno-WIDTH", "-Wno-UNOPTFLAT", "-Wno-UNUSEDSIGNAL", "-Wno-DECLFILENAME", "--trace"])
                .args(["--prefix", &prefix, "--top-module", "top", "--Mdir"])
                .arg(&mdir)
                .arg(&vfile)
                .status()
                .context("running verilator")?;
            if !st.success() {
                bail!("verilator failed on {name}");
            }
            skip_idle_input_settle(&mdir, name)?;
        }
        let ports = ports_of_top(&block.verilog)?;
        // C++ shim
        let mut cpp = format!(
            "#include \"{prefix}.h\"\n#include \"verilated.h\"\n#include \"verilated_vcd_c.h\"\n#include <cstdint>\n\
             struct H_{name} {{ VerilatedContext ctx; {prefix}* m; VerilatedVcdC* vcd = nullptr; bool dirty = true; }};\n\
             thread_local bool vl_skip_ico_{name} = false;\n\
             extern \"C\" {{\n\
             void* {name}_new() {{ auto* h = new H_{name}; h->m = new {prefix}(&h->ctx); return h; }}\n\
             void {name}_delete(void* p) {{ auto* h = (H_{name}*)p; if (h->vcd) {{ h->vcd->close(); delete h->vcd; }} h->m->final(); delete h->m; delete h; }}\n\
             void {name}_eval(void* p) {{ auto* h = (H_{name}*)p; vl_skip_ico_{name} = !h->dirty; h->m->eval(); vl_skip_ico_{name} = false; h->dirty = false; }}\n\
             void {name}_trace_open(void* p, const char* path) {{ auto* h = (H_{name}*)p; h->ctx.traceEverOn(true); h->vcd = new VerilatedVcdC; h->m->trace(h->vcd, 99); h->vcd->open(path); }}\n\
             void {name}_trace_dump(void* p, uint64_t t) {{ auto* h = (H_{name}*)p; if (h->vcd) h->vcd->dump(t); }}\n"
        );
        let mut rs_methods = String::new();
        let mut rs_externs = String::new();
        for p in &ports {
            let c = p.name.replace('$', "__024");
            let r = p.name.replace('$', "_");
            if p.width <= 64 {
                if p.input {
                    // The clock is not an input of the input-driven logic (see `skip_idle_input_settle`).
                    let mark = if p.name == "clock" { String::new() } else { format!(" h->dirty |= h->m->{c} != v;") };
                    writeln!(cpp, "void {name}_set_{r}(void* p, uint64_t v) {{ auto* h = (H_{name}*)p;{mark} h->m->{c} = v; }}")?;
                    writeln!(rs_externs, "        fn {name}_set_{r}(p: *mut c_void, v: u64);")?;
                    writeln!(rs_methods, "        pub fn set_{r}(&mut self, v: u64) {{ unsafe {{ {name}_set_{r}(self.0, v) }} }}")?;
                } else {
                    writeln!(cpp, "uint64_t {name}_get_{r}(void* p) {{ return ((H_{name}*)p)->m->{c}; }}")?;
                    writeln!(rs_externs, "        fn {name}_get_{r}(p: *mut c_void) -> u64;")?;
                    writeln!(rs_methods, "        pub fn {r}(&self) -> u64 {{ unsafe {{ {name}_get_{r}(self.0) }} }}")?;
                }
            } else {
                let words = p.width.div_ceil(32);
                if p.input {
                    writeln!(cpp, "void {name}_set_{r}(void* p, const uint32_t* w) {{ auto* h = (H_{name}*)p; for (int i = 0; i < {words}; i++) {{ h->dirty |= h->m->{c}[i] != w[i]; h->m->{c}[i] = w[i]; }} }}")?;
                    writeln!(rs_externs, "        fn {name}_set_{r}(p: *mut c_void, w: *const u32);")?;
                    writeln!(rs_methods, "        pub fn set_{r}(&mut self, w: &[u32; {words}]) {{ unsafe {{ {name}_set_{r}(self.0, w.as_ptr()) }} }}")?;
                } else {
                    writeln!(cpp, "void {name}_get_{r}(void* p, uint32_t* w) {{ for (int i = 0; i < {words}; i++) w[i] = ((H_{name}*)p)->m->{c}[i]; }}")?;
                    writeln!(rs_externs, "        fn {name}_get_{r}(p: *mut c_void, w: *mut u32);")?;
                    writeln!(rs_methods, "        pub fn {r}(&self) -> [u32; {words}] {{ let mut w = [0u32; {words}]; unsafe {{ {name}_get_{r}(self.0, w.as_mut_ptr()) }}; w }}")?;
                }
            }
        }
        cpp.push_str("}\n");
        let shim = mdir.join(format!("{name}_shim.cpp"));
        std::fs::write(&shim, cpp)?;

        let ty: String = name
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
            })
            .collect();
        write!(
            rust,
            "/// Verilator model of the emitted `{name}` block.\npub mod {name} {{\n    use std::ffi::{{c_void, CString}};\n    extern \"C\" {{\n        fn {name}_new() -> *mut c_void;\n        fn {name}_delete(p: *mut c_void);\n        fn {name}_eval(p: *mut c_void);\n        fn {name}_trace_open(p: *mut c_void, path: *const std::ffi::c_char);\n        fn {name}_trace_dump(p: *mut c_void, t: u64);\n{rs_externs}    }}\n    pub struct {ty}(*mut c_void);\n    impl Default for {ty} {{ fn default() -> Self {{ Self::new() }} }}\n    impl {ty} {{\n        pub fn new() -> Self {{ Self(unsafe {{ {name}_new() }}) }}\n        pub fn eval(&mut self) {{ unsafe {{ {name}_eval(self.0) }} }}\n        /// Start a VCD of every signal at `path`; call `trace_dump` once per half clock.\n        pub fn trace_open(&mut self, path: &str) {{ let c = CString::new(path).unwrap(); unsafe {{ {name}_trace_open(self.0, c.as_ptr()) }} }}\n        pub fn trace_dump(&mut self, t: u64) {{ unsafe {{ {name}_trace_dump(self.0, t) }} }}\n{rs_methods}    }}\n    impl Drop for {ty} {{ fn drop(&mut self) {{ unsafe {{ {name}_delete(self.0) }} }} }}\n    impl crate::VModel for {ty} {{\n        fn eval(&mut self) {{ {ty}::eval(self) }}\n        fn set_clock(&mut self, v: u64) {{ {ty}::set_clock(self, v) }}\n        fn trace_open(&mut self, path: &str) {{ {ty}::trace_open(self, path) }}\n        fn trace_dump(&mut self, t: u64) {{ {ty}::trace_dump(self, t) }}\n    }}\n}}\n"
        )?;

        // Verilator's `__Slow` files run once (initial values, settle, the first full trace dump): they are
        // half of the C++ and most of its compile time at -O2, so they are built at -O0 and archived with the
        // per-cycle code, which stays at -O2 (at -O1 the whole RNIC simulates about 23 % slower). The
        // per-cycle trace code (`__Trace__N`, the VCD's value changes) runs only while a VCD is open: -O1,
        // which compiles the top's largest file in 7 s instead of 17.
        let lib = format!("vmodel_{name}");
        if fresh && out.join(format!("lib{lib}.a")).exists() {
            link_cached(&out, &lib);
        } else {
            let mut fast = shim_build.clone();
            fast.include(&mdir);
            let mut slow = shim_build.clone();
            slow.include(&mdir).opt_level(0);
            let mut trace = shim_build.clone();
            trace.include(&mdir).opt_level(1);
            for f in classes(&mdir.join(format!("{prefix}_classes.mk")))? {
                let b = if f.ends_with("__Slow") {
                    &mut slow
                } else if f.contains("__Trace__") {
                    &mut trace
                } else {
                    &mut fast
                };
                b.file(mdir.join(format!("{f}.cpp")));
            }
            for o in slow.compile_intermediates().into_iter().chain(trace.compile_intermediates()) {
                fast.object(o);
            }
            fast.file(&shim);
            fast.compile(&lib);
            std::fs::write(&stamp, &hash)?;
        }
    }

    if out.join("libverilated_rt.a").exists() {
        link_cached(&out, "verilated_rt");
    } else {
        let mut rt = shim_build.clone();
        for f in ["verilated.cpp", "verilated_threads.cpp", "verilated_vcd_c.cpp"] {
            rt.file(inc.join(f));
        }
        rt.compile("verilated_rt");
    }
    std::fs::write(out.join("models.rs"), rust)?;
    Ok(())
}
