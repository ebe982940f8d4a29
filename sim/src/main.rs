//! `rnic`: the RNIC's command line. One subcommand per capability.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use sim::icrc_harness::{random_roce_frame, run_lockstep, IcrcDut, VerilatorIcrc};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use testbench::wire::frame::{parse_ethernet, Frame};

/// The real rxe capture shipped with the project (Linux 6.1 rxe <-> rxe, one frame per opcode).
const RXE_CAPTURE: &[u8] = include_bytes!("../../testbench/data/rxe-examples.pcap");

#[derive(Parser)]
#[command(name = "rnic", version, about = "Open RoCEv2 RNIC in rust-hdl: models, simulators, gates and tools")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum BoardCmd {
    /// Write the board top's Verilog, the XDC, the non-project Vivado Tcl and a README into OUT; run
    /// `vivado -mode batch -source build_u250.tcl` there if Vivado is on PATH, else print that command.
    Build {
        /// The card: u250 (AMD Alveo U250).
        #[arg(long, default_value = "u250")]
        board: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Find the card (10ee:903f, bound to vfio-pci) and read what it is: board and RNIC IDs, version, CAPS,
    /// link state, QSFP and MAC status; each problem named with what it usually means (docs/bringup.md).
    Probe {
        #[command(flatten)]
        dev: DevArgs,
    },
    /// Register walk; the MAC in near-end loopback; a QP connected to itself carrying WRITE, READ, SEND and
    /// FETCH_ADD through DMA and the MAC, every byte checked; counters checked; the link restored.
    Selftest {
        #[command(flatten)]
        dev: DevArgs,
    },
    /// Ask the wire for a neighbour's MAC with the RNIC's own ARP requests (what the tool peers do for the
    /// peer in its GID): up to 3 requests, 300 ms each. With --sim, the host on the simulated board's link
    /// answers for 10.0.0.9.
    Arp {
        #[command(flatten)]
        dev: DevArgs,
        /// The neighbour's IPv4 address on the 100G link, e.g. 10.0.0.1
        #[arg(long)]
        ip: std::net::Ipv4Addr,
    },
    /// Every RNIC and MAC counter by name.
    Stats {
        #[command(flatten)]
        dev: DevArgs,
    },
    /// Give the RNIC its Ethernet and IPv4 address (ARP and ping are answered for it from then on).
    Address {
        #[command(flatten)]
        dev: DevArgs,
        /// e.g. 10.0.0.2
        #[arg(long)]
        ip: std::net::Ipv4Addr,
        /// e.g. 02:00:00:00:00:02 (default: 02:00 followed by the IPv4 address)
        #[arg(long)]
        mac: Option<String>,
    },
}

/// Which board: the card on this host's PCIe bus, or the simulated one.
#[derive(clap::Args)]
struct DevArgs {
    /// The card's PCI address (e.g. 3b:00.0); default: the only card of ours.
    #[arg(long)]
    pci: Option<String>,
    /// The simulated board instead: the U250 board shell as a Verilator model with its PCIe bridge and 100G
    /// MAC models (the same commands and checks as on the card).
    #[arg(long, conflicts_with = "pci")]
    sim: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Decode a pcap: one line per frame, ICRC verified; exit 0 only if every RoCEv2 frame is good.
    Decode { file: PathBuf },
    /// Write the Verilog of the current top (top.v) and of every block into DIR.
    Emit {
        #[arg(long)]
        out: PathBuf,
        /// Also lint every file with `verilator --lint-only -Wall`.
        #[arg(long)]
        lint: bool,
    },
    /// Lint every emitted block with `verilator --lint-only -Wall` (waivers: fpga/lint/verilator.vlt).
    Lint,
    /// Synthesise every block with Yosys (synth_xilinx -family xcup): LUT/FF/BRAM/DSP and LUT6 levels.
    Synth {
        /// Only this block.
        #[arg(long)]
        block: Option<String>,
    },
    /// The board layer: `build` writes a card's Verilog, constraints and Vivado flow (and runs Vivado if it is
    /// on PATH); the bring-up commands `probe`, `address`, `arp`, `selftest` and `stats` run on the card
    /// (`--pci BDF`, bound to vfio-pci) or on the simulated board (`--sim`). The ladder from a bitstream to
    /// perftest against rxe, with the output to expect at each step: docs/bringup.md.
    Board {
        #[command(subcommand)]
        what: BoardCmd,
    },
    /// Run an unmodified rdma-core/perftest tool in a Linux soft-RoCE (rxe) VM against our endpoint.
    Rxe {
        /// Our side: `model` (the golden transport model), `rtl` (the Verilator RNIC), `board-sim` (the
        /// RNIC inside the U250 board shell, with models of the PCIe bridge and the 100G MAC), or `board`: the
        /// card's own host code (the driver in this thread over a register bus and DMA memory, the tools'
        /// exchange over the host's ordinary network). Without --pci, `board` runs over the simulated board
        /// against the lab's VM (its second NIC carries the exchange); with --pci and --peer, over the card
        /// against the tool you start on a remote rxe host.
        #[arg(long, default_value = "model")]
        endpoint: String,
        /// With `--endpoint board`: the card's PCI address (e.g. 3b:00.0), bound to vfio-pci.
        #[arg(long)]
        pci: Option<String>,
        /// With `--endpoint board --pci`: the rxe host's address on the ordinary network (the tools' TCP
        /// exchange goes there; the RoCE traffic goes over the card's link to the address in its GID).
        #[arg(long)]
        peer: Option<std::net::Ipv4Addr>,
        /// The exchange's TCP port (the tools' -p).
        #[arg(long, default_value_t = 18515)]
        port: u16,
        /// ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong, ib_send_bw, ib_write_bw, ib_read_bw, ib_atomic_bw
        /// (fetch-and-add), ib_atomic_bw_cas, ib_send_lat, ib_write_lat, ib_read_lat.
        #[arg(long)]
        tool: String,
        /// The transport, perftest's -c: RC (the default), UC (ib_send_bw, ib_write_bw, ib_send_lat,
        /// ib_write_lat; UC has no READ or atomics) or UD (ib_send_bw, ib_send_lat: SEND only, messages of at
        /// most the path MTU). The pingpong tools
        /// name their own (ibv_rc_pingpong: RC, ibv_uc_pingpong: UC, ibv_ud_pingpong: UD).
        #[arg(long)]
        conn: Option<String>,
        /// Our endpoint's role: server (the tool in the VM connects to us) or client.
        #[arg(long, default_value = "server")]
        role: String,
        /// RDMA path MTU (256..4096); the VM's netdev MTU is set to fit (1500, or 9000 above 1024).
        #[arg(long, default_value_t = 1024)]
        mtu: u32,
        /// Message size handed to the tool (default: the tool's own).
        #[arg(long)]
        size: Option<usize>,
        /// Iterations (default: a short run suited to the emulated VM).
        #[arg(long)]
        iters: Option<usize>,
        /// Fraction of RoCEv2 frames the bridge drops, each way (ARP and the tools' TCP are never dropped).
        #[arg(long, default_value_t = 0.0)]
        drop: f64,
        /// Seed of the drop decisions and of our starting PSN (a lossy run is reproduced by the same seed, up to
        /// the VM's timing).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Capture of every frame on the link.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// RoCEv2 over IPv6 (the pingpong tools: RC, UC and UD): the VM's eth0 gets fd00::1/64, our side fd00::2,
        /// and both tools use those addresses' GIDs; the VM finds our MAC by neighbour solicitation.
        #[arg(long)]
        ipv6: bool,
        /// On an 802.1Q VLAN with this ID (the pingpong tools, RTL endpoint): the VM's address on eth0.VID
        /// (rxe on eth0 takes its GIDs from there), our port on the same VLAN; every RoCE, ARP and ND frame on the link is tagged.
        #[arg(long)]
        vlan: Option<u16>,
        /// The perftest tools (RC, RTL endpoint) with perftest's -R: the exchange and the test QP connected
        /// through rdma_cm and our CM agent on QP1, no TCP.
        #[arg(long)]
        rdma_cm: bool,
    },
    /// What the project can show today: the RTL ICRC engine (Verilator model of the emitted Verilog)
    /// checks a real rxe capture against the golden model, then runs random frames at full rate.
    Demo {
        /// Random frames after the capture.
        #[arg(long, default_value_t = 20_000)]
        frames: usize,
        /// Core clock for the throughput figure, MHz.
        #[arg(long, default_value_t = 322.265625)]
        clock_mhz: f64,
        /// Write a VCD of the Verilator model here.
        #[arg(long)]
        vcd: Option<PathBuf>,
    },
    /// Two RTL RNICs (Verilator) on one 100G link: goodput, message rate and latency in core cycles; writes
    /// bench.csv and bench.svg.
    Bench {
        /// Core clock, MHz (322.265625 for the CMAC user clock; 250 also common).
        #[arg(long, default_value_t = 322.265625)]
        clock_mhz: f64,
        /// Host-memory latency behind the DMA ports, ns (a PCIe round trip).
        #[arg(long, default_value_t = 500.0)]
        host_latency_ns: f64,
        /// The host behind the DMA ports for the goodput points: `ideal` (the latency above, a 64-byte beat
        /// every cycle each way, no write backpressure) or `pcie` (each RNIC inside the U250 board shell,
        /// host memory behind a PCIe Gen3 x16 bridge model: TLP overheads at MPS 256 and 64-byte completions,
        /// 500-700 ns reads, 32 bursts outstanding, backpressure).
        #[arg(long, default_value = "ideal")]
        host: String,
        /// A few points only (seconds instead of tens of minutes).
        #[arg(long)]
        quick: bool,
        /// Where bench.csv and bench.svg go.
        #[arg(long, default_value = "bench-out")]
        out: PathBuf,
        /// Only these verbs (write, read, send), comma separated.
        #[arg(long, value_delimiter = ',')]
        verb: Vec<String>,
        /// Only these path MTUs.
        #[arg(long, value_delimiter = ',')]
        mtu: Vec<u32>,
        /// Only these QP counts.
        #[arg(long, value_delimiter = ',')]
        qps: Vec<usize>,
        /// Only these message sizes (bytes).
        #[arg(long, value_delimiter = ',')]
        size: Vec<u64>,
        /// VCDs of both RNICs for the first 20,000 cycles of every point, into this directory.
        #[arg(long)]
        vcd: Option<PathBuf>,
        /// Post SENDs and WRITEs of at most 256 bytes as inline WQEs (their data in the send ring), as
        /// perftest does for small messages.
        #[arg(long)]
        inline: bool,
        /// Payload bytes per point (default 2 MiB, 256 KiB with --quick): the point's message count is this
        /// over the size, at least 16 per QP and at most 4,096 (perftest's default is 5,000 iterations).
        #[arg(long)]
        bytes: Option<u64>,
    },
    /// Connection-management traffic between two rxe hosts (two lab VMs back to back: rping, including one to a
    /// port nobody listens on, udaddy, ucmatose), every frame of their link written to a pcap: the source of
    /// the golden CM MADs (`testbench/data/rxe-cm.pcap`).
    CaptureCm {
        #[arg(long)]
        out: PathBuf,
    },
    /// Fuzz the RX port of the Verilator RNIC: N seeded random, malformed and mutated frames (`sim::fuzz`);
    /// checks no hang, no write outside a registered MR and that every drop is counted; exit 0 only if all hold.
    Fuzz {
        #[arg(long, default_value_t = 100_000)]
        frames: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Frames between QP resets and counter checks.
        #[arg(long, default_value_t = 1000)]
        chunk: usize,
        /// Where the pcaps go (rnic-rx.pcap: every injected frame, record k = frame k; rnic-tx.pcap).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Leave out frames shorter than their IP datagram (RX Parse drops them as bad length): tells a
        /// regression of that rule apart from the rest.
        #[arg(long)]
        skip_truncated: bool,
    },
    /// Fault campaign (`sim::campaign`): the RTL with 16 QPs on a link with seeded drops, duplicates, reorders
    /// and bit flips both ways, rounds of 32 mixed SEND / WRITE / WRITE_IMM / READ of 0 B .. 16 KiB; every
    /// message must succeed, every byte land, nothing hang. Exit 0 only if all hold.
    Campaign {
        /// responder (golden requester, RTL responder), requester (RTL requester, golden responder), pair
        /// (RTL against RTL, both directions at once), reads (128 READs outstanding per QP: the RTL requester
        /// and the golden one, each against the golden responder, the work each needed and its ratio), atomics (RTL against RTL: --messages FETCH_ADD(1)
        /// from 16 QPs on one counter, then a COMPARE_SWAP spin lock), or uc (the golden model sends on 4 UC QPs
        /// in rounds of 16 SEND / SEND_IMM / WRITE / WRITE_IMM, the RTL receives: every receive completion a whole
        /// message, the drops counted), or ud (the same on 4 UD QPs with SEND / SEND_IMM: every receive a whole
        /// datagram behind its GRH area).
        #[arg(long, default_value = "pair")]
        role: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 1024)]
        mtu: u32,
        /// Messages (each way for `pair`), rounded up to rounds of 32 (of 2,048 for `reads`: 128 per QP).
        #[arg(long, default_value_t = 1024)]
        messages: usize,
        /// Fault rates per frame, each direction.
        #[arg(long, default_value_t = 0.01)]
        drop: f64,
        #[arg(long, default_value_t = 0.005)]
        duplicate: f64,
        #[arg(long, default_value_t = 0.005)]
        reorder: f64,
        #[arg(long, default_value_t = 0.001)]
        corrupt: f64,
        /// `atomics` only: increments under the spin lock, in all, rounded up to a multiple of 16 (default: 1 %
        /// of --messages, at least 64).
        #[arg(long)]
        locks: Option<usize>,
        /// `atomics` only: masked FETCH_ADDs (random operands and field boundaries, each QP on a word of its own)
        /// between the FETCH_ADDs, in all, rounded up to a multiple of 16.
        #[arg(long, default_value_t = 0)]
        masked: usize,
        /// `atomics` only: every QP's local ACK timeout exponent, 4.096 us x 2^N (4: 65.5 us). A lost frame of
        /// the lock holder stalls every QP for this long.
        #[arg(long, default_value_t = 4)]
        timeout: u8,
        /// `atomics` only: host-memory latency in ns on both sides (500: a PCIe round trip).
        #[arg(long, default_value_t = 500.0)]
        host_latency_ns: f64,
        /// Where the pcaps go.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also a VCD of the RTL's every signal for the whole run (large: about 2.7 MB per 1,000 cycles, 108 MB for
        /// one round of 32 messages). `pair`: side A into this file, side B into FILE.b.vcd.
        #[arg(long)]
        vcd: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rnic: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Decode { file } => {
            let report = testbench::decode::decode_pcap(&file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            print!("{report}");
            Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Cmd::Emit { out, lint } => {
            for f in fpga::gates::emit(&out)? {
                if lint {
                    fpga::gates::lint(&f)?;
                    println!("{}  lint clean", f.display());
                } else {
                    println!("{}", f.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Lint => {
            let dir = scratch("lint")?;
            for f in fpga::gates::emit(&dir)? {
                fpga::gates::lint(&f)?;
                println!("{:<24} lint clean (verilator --lint-only -Wall)", f.file_name().unwrap().to_string_lossy());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Synth { block } => synth(block.as_deref()),
        Cmd::Board { what: BoardCmd::Build { board, out } } => board_build(&board, &out),
        Cmd::Board { what: BoardCmd::Probe { dev } } => board_probe(&dev),
        Cmd::Board { what: BoardCmd::Selftest { dev } } => board_selftest(&dev),
        Cmd::Board { what: BoardCmd::Stats { dev } } => board_stats(&dev),
        Cmd::Board { what: BoardCmd::Arp { dev, ip } } => board_arp(&dev, ip),
        Cmd::Board { what: BoardCmd::Address { dev, ip, mac } } => board_address(&dev, ip, mac.as_deref()),
        Cmd::Demo { frames, clock_mhz, vcd } => demo(frames, clock_mhz, vcd.as_deref()),
        Cmd::Bench { clock_mhz, host_latency_ns, host, quick, out, verb, mtu, qps, size, vcd, inline, bytes } => {
            bench(clock_mhz, host_latency_ns, quick, &out, Sweep { verb, mtu, qps, size, vcd, inline, bytes, host })
        }
        Cmd::CaptureCm { out } => {
            let image = sim::rxe::build_vm()?;
            let c = sim::rxe::capture::capture_cm(&image, &out)?;
            for (name, rc) in &c.clients {
                println!("{name}: rc {rc:?}");
            }
            println!("pcap: {}\nVM logs: {} {}", c.pcap.display(), c.server.log_path.display(), c.client.log_path.display());
            Ok(if c.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Cmd::Fuzz { frames, seed, chunk, out, skip_truncated } => fuzz(frames, seed, chunk, out, skip_truncated),
        Cmd::Campaign { role, seed, mtu, messages, drop, duplicate, reorder, corrupt, locks, masked, timeout, host_latency_ns, out, vcd } => {
            campaign(&role, seed, mtu, messages, [drop, duplicate, reorder, corrupt], locks, masked, timeout, host_latency_ns, out, vcd)
        }
        Cmd::Rxe { endpoint, tool, conn, role, mtu, size, iters, drop, seed, pcap, pci, peer, port, ipv6, vlan, rdma_cm } => {
            let conn = rxe_conn(&tool, conn.as_deref())?;
            if pci.is_some() || peer.is_some() {
                anyhow::ensure!(endpoint == "board", "--pci and --peer go with --endpoint board");
                anyhow::ensure!(vlan.is_none(), "--vlan runs in the lab (the card's code path does not set a VLAN up yet)");
                anyhow::ensure!(!ipv6, "--ipv6 runs in the lab: against a remote host our side needs the peer's MAC, and it does not solicit neighbours");
                anyhow::ensure!(!rdma_cm, "--rdma-cm runs in the lab (RTL endpoint)");
                let peer = peer.context("--endpoint board --pci needs --peer (the rxe host's address)")?;
                return rxe_card(&DevArgs { pci, sim: false }, peer, port, &tool, conn, &role, mtu, size, iters);
            }
            rxe(&endpoint, &tool, conn, &role, mtu, size, iters, drop, seed, pcap, ipv6, vlan, rdma_cm)
        }
    }
}

/// `rnic bench` filters: an empty list keeps the sweep's own.
struct Sweep {
    verb: Vec<String>,
    mtu: Vec<u32>,
    qps: Vec<usize>,
    size: Vec<u64>,
    vcd: Option<PathBuf>,
    inline: bool,
    bytes: Option<u64>,
    host: String,
}

fn bench(clock_mhz: f64, host_latency_ns: f64, quick: bool, out: &Path, sw: Sweep) -> Result<ExitCode> {
    use sim::bench::{self, BenchOpts};
    use testbench::model::WrOpcode;
    let mut o = if quick { BenchOpts::quick(clock_mhz) } else { BenchOpts::full(clock_mhz) };
    o.host_latency_ns = host_latency_ns;
    o.host = match sw.host.as_str() {
        "ideal" => None,
        "pcie" => Some(sim::board::PcieHost::gen3_x16()),
        h => anyhow::bail!("--host is ideal or pcie, not {h:?}"),
    };
    if let Some(h) = &o.host {
        println!(
            "host: each RNIC in the U250 board shell, host memory behind PCIe Gen3 x16 (payload {:.1} Gb/s written, {:.1} Gb/s read after TLP overheads; reads {}-{} ns; 32 bursts outstanding)",
            h.write_gbps(),
            h.read_gbps(),
            h.read_ns,
            h.read_ns + h.jitter_ns
        );
    }
    if !sw.verb.is_empty() {
        o.verbs = sw
            .verb
            .iter()
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "write" => Ok(WrOpcode::RdmaWrite),
                "read" => Ok(WrOpcode::RdmaRead),
                "send" => Ok(WrOpcode::Send),
                _ => Err(anyhow::anyhow!("--verb is write, read or send, not {v:?}")),
            })
            .collect::<Result<_>>()?;
    }
    anyhow::ensure!(sw.mtu.iter().all(|m| (256..=4096).contains(m) && m.is_power_of_two()), "--mtu must be 256 .. 4096, a power of two");
    anyhow::ensure!(sw.qps.iter().all(|&q| (1..=16).contains(&q)), "--qps must be 1 .. 16");
    anyhow::ensure!(sw.size.iter().all(|&z| (1..=1 << 20).contains(&z)), "--size must be 1 B .. 1 MiB");
    fn uniq<T: Ord>(mut v: Vec<T>) -> Vec<T> {
        v.sort_unstable();
        v.dedup();
        v
    }
    if !sw.mtu.is_empty() {
        o.mtus = uniq(sw.mtu);
    }
    if !sw.qps.is_empty() {
        o.qps = uniq(sw.qps);
    }
    if !sw.size.is_empty() {
        o.sizes = uniq(sw.size);
    }
    let mut seen = Vec::new();
    o.verbs.retain(|v| !seen.contains(v) && {
        seen.push(*v);
        true
    });
    o.vcd = sw.vcd;
    o.inline = sw.inline;
    if let Some(b) = sw.bytes {
        anyhow::ensure!((1..=1 << 30).contains(&b), "--bytes must be 1 B .. 1 GiB");
        o.bytes_per_point = b;
    }
    std::fs::create_dir_all(out)?;
    let pcaps = out.join("pcap");
    println!("rnic bench: two RTL RNICs (Verilator models of the emitted top) on one 100G link, core clock {clock_mhz} MHz, host memory {host_latency_ns} ns away");
    let lat = bench::latency(&o, &pcaps.join("latency"))?;
    println!(
        "latency (64-byte WRITE, idle): doorbell -> first beat on the wire {} cycles ({:.0} ns), inline WQE {} cycles ({:.0} ns, {} + one host round trip of {}); last request beat in -> payload DMA write {} cycles; request in -> ACK out {} cycles",
        lat.doorbell_to_wire,
        lat.doorbell_to_wire as f64 * 1e3 / clock_mhz,
        lat.inline_doorbell_to_wire,
        lat.inline_doorbell_to_wire as f64 * 1e3 / clock_mhz,
        lat.inline_doorbell_to_wire as i64 - lat.host_round_trip as i64,
        lat.host_round_trip,
        lat.rx_to_dma_write,
        lat.request_to_ack
    );
    let mut keys = Vec::new();
    for &verb in &o.verbs {
        for &mtu in &o.mtus {
            for &qps in &o.qps {
                for &size in &o.sizes {
                    keys.push((verb, mtu, qps, size));
                }
            }
        }
    }
    let pb = ProgressBar::new(keys.len() as u64).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} points {elapsed} {msg}").unwrap());
    let t = Instant::now();
    let mut points = Vec::new();
    let mut cycles = 0u64;
    for (verb, mtu, qps, size) in keys {
        pb.set_message(format!("{verb:?} MTU {mtu} {qps} QP {size} B"));
        let p = bench::goodput(&o, verb, mtu, qps, size, &pcaps.join(bench::point_name(&o, verb, mtu, qps, size)))?;
        cycles += p.cycles;
        points.push(p);
        pb.inc(1);
    }
    pb.finish_and_clear();
    println!("{:<10} {:>5} {:>4} {:>8} {:>6} {:>9} {:>8} {:>7} {:>10}  {}", "verb", "MTU", "QPs", "size", "msgs", "cycles", "Gb/s", "Mpps", "wire Gb/s", "note");
    for p in &points {
        println!(
            "{:<10} {:>5} {:>4} {:>8} {:>6} {:>9} {:>8.1} {:>7.2} {:>10.1}  {}",
            format!("{:?}{}", p.verb, if p.inline { " inl" } else { "" }).replace("Rdma", ""),
            p.mtu,
            p.qps,
            p.size,
            p.messages,
            p.cycles,
            p.gbps,
            p.mpps,
            p.wire_limit_gbps,
            if p.problem.is_empty() { &p.note } else { &p.problem }
        );
    }
    let pair = cycles as f64 / t.elapsed().as_secs_f64() / 1e6;
    println!("simulation speed: {pair:.3} M cycles/s of the two RNICs in one thread ({:.3} M cycles/s of RNIC; the points' cycles over the whole run's time)", 2.0 * pair);
    std::fs::write(out.join("bench.csv"), bench::csv(&points))?;
    std::fs::write(out.join("bench.svg"), bench::svg(&points, &format!("rnic bench: two RTL RNICs, 100G, {clock_mhz} MHz, host memory {host_latency_ns} ns")))?;
    println!("wrote {} and {}; pcaps under {}", out.join("bench.csv").display(), out.join("bench.svg").display(), pcaps.display());
    Ok(if points.iter().all(|p| p.problem.is_empty()) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn fuzz(frames: u64, seed: u64, chunk: usize, out: Option<PathBuf>, skip_truncated: bool) -> Result<ExitCode> {
    let dir = match out {
        Some(d) => d,
        None => scratch("fuzz")?,
    };
    let mut o = sim::fuzz::FuzzOpts::new(frames, seed, &dir);
    o.chunk = chunk;
    o.skip_truncated = skip_truncated;
    println!("rnic fuzz: {frames} frames, seed {seed}, into the RX port of the Verilator RNIC; pcaps in {}", dir.display());
    let pb = ProgressBar::new(frames).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} frames {elapsed} (eta {eta})").unwrap());
    let rep = sim::fuzz::run(&o, &mut |n| pb.set_position(n))?;
    pb.finish_and_clear();
    print!("{rep}");
    Ok(if rep.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn campaign(role: &str, seed: u64, mtu: u32, messages: usize, rates: [f64; 4], locks: Option<usize>, masked: usize, timeout: u8, host_ns: f64, out: Option<PathBuf>, vcd: Option<PathBuf>) -> Result<ExitCode> {
    use sim::campaign::{self as c, PER_ROUND};
    anyhow::ensure!((256..=4096).contains(&mtu) && mtu.is_power_of_two(), "--mtu must be 256, 512, 1024, 2048 or 4096");
    anyhow::ensure!(rates.iter().all(|r| (0.0..0.5).contains(r)), "fault rates are fractions in [0, 0.5)");
    let f = testbench::mac::MacFaults { drop: rates[0], duplicate: rates[1], reorder: rates[2], corrupt: rates[3], fcs: 0.0, reorder_cycles: 2_000 };
    let per_round = if role == "uc" || role == "ud" { c::UC_PER_ROUND } else { PER_ROUND };
    let rounds = messages.div_ceil(per_round).max(1);
    anyhow::ensure!(locks.is_none() || role == "atomics", "--locks is for --role atomics");
    anyhow::ensure!((1..=31).contains(&timeout), "--timeout is an exponent 1..=31");
    anyhow::ensure!(timeout == 4 || role == "atomics", "--timeout is for --role atomics");
    anyhow::ensure!(masked == 0 || role == "atomics", "--masked is for --role atomics");
    anyhow::ensure!(host_ns == 500.0 || role == "atomics", "--host-latency-ns is for --role atomics");
    anyhow::ensure!((0.0..=100_000.0).contains(&host_ns), "--host-latency-ns must be 0..=100000");
    if role == "atomics" {
        // `messages` FETCH_ADD(1) from 16 QPs on one counter, then a spin lock
        let per_qp = messages.div_ceil(c::QPS).max(1);
        let masked_per_qp = masked.div_ceil(c::QPS);
        let locks = locks.map_or((per_qp / 100).max(4), |l| l.div_ceil(c::QPS).max(1));
        let dir = match out {
            Some(d) => d,
            None => scratch("campaign")?,
        };
        std::fs::create_dir_all(&dir)?;
        let total = c::QPS * (per_qp + masked_per_qp + locks);
        println!("rnic campaign: role atomics, seed {seed}, {} FETCH_ADD, {} masked FETCH_ADD and {} locked increments over 16 QPs, faults {rates:?}, host memory {host_ns} ns, timeout exponent {timeout}; pcaps in {}", c::QPS * per_qp, c::QPS * masked_per_qp, c::QPS * locks, dir.display());
        let pb = ProgressBar::new(total as u64).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} operations {elapsed} (eta {eta})").unwrap());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c::atomics(seed, per_qp, masked_per_qp, locks, timeout, host_ns, f, &dir, &mut |n| pb.set_position(n as u64))));
        pb.finish_and_clear();
        return Ok(match r {
            Ok(summary) => {
                print!("{summary}");
                println!("PASS");
                ExitCode::SUCCESS
            }
            Err(_) => {
                println!("FAIL (seed {seed}; pcaps in {})", dir.display());
                ExitCode::FAILURE
            }
        });
    }
    if role == "reads" {
        // 128 READs outstanding per QP, the RTL requester and the golden one against the golden responder
        let rounds = messages.div_ceil(c::QPS * c::READS_PER_QP).max(1);
        let dir = match out {
            Some(d) => d,
            None => scratch("campaign")?,
        };
        std::fs::create_dir_all(&dir)?;
        println!(
            "rnic campaign: role reads, seed {seed}, MTU {mtu}, {} READs ({} posted at once per QP on {} QPs), faults {rates:?}; pcaps in {}",
            rounds * c::QPS * c::READS_PER_QP, c::READS_PER_QP, c::QPS, dir.display()
        );
        let pb = ProgressBar::new(rounds as u64).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} rounds of the RTL {elapsed} (eta {eta}), then the golden twin").unwrap());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c::reads(seed, mtu, rounds, f, &dir, vcd.as_deref(), &mut |n| pb.set_position(n as u64))));
        pb.finish_and_clear();
        return Ok(match r {
            Ok(rep) => {
                print!("{}", rep.summary);
                println!("PASS");
                ExitCode::SUCCESS
            }
            Err(_) => {
                println!("FAIL (seed {seed}; pcaps in {})", dir.display());
                ExitCode::FAILURE
            }
        });
    }
    let run: fn(u64, u32, usize, testbench::mac::MacFaults, &Path, Option<&Path>, &mut dyn FnMut(usize)) -> String = match role {
        "responder" => c::responder,
        "requester" => c::requester,
        "pair" => c::pair,
        "uc" => c::uc_responder,
        "ud" => c::ud_responder,
        _ => anyhow::bail!("--role is responder, requester, pair, uc, ud, reads or atomics"),
    };
    let dir = match out {
        Some(d) => d,
        None => scratch("campaign")?,
    };
    std::fs::create_dir_all(&dir)?;
    println!("rnic campaign: role {role}, seed {seed}, MTU {mtu}, {} messages, faults {rates:?}; pcaps in {}", rounds * per_round, dir.display());
    if let Some(v) = &vcd {
        println!("VCD: {}", v.display());
    }
    let pb = ProgressBar::new(rounds as u64).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} rounds {elapsed} (eta {eta})").unwrap());
    // the campaign's checks are assertions: a failed one is reported here, with the seed that reproduces it
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, mtu, rounds, f, &dir, vcd.as_deref(), &mut |n| pb.set_position(n as u64))));
    pb.finish_and_clear();
    match r {
        Ok(summary) => {
            print!("{summary}");
            println!("PASS");
            Ok(ExitCode::SUCCESS)
        }
        Err(_) => {
            println!("FAIL (seed {seed}; pcaps in {})", dir.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The transport of an `rnic rxe` run: the pingpong tool's own, else `--conn` (perftest's `-c`, RC by
/// default). Checked before anything starts: a pingpong tool with another `--conn`, UD, and a perftest tool the
/// transport has no operation for are errors.
fn rxe_conn(tool: &str, conn: Option<&str>) -> Result<sim::rxe::verbs::Conn> {
    use sim::rxe::{perftest, pingpong};
    let asked = conn.map(|c| c.parse::<sim::rxe::verbs::Conn>().map_err(|e| anyhow::anyhow!("--conn: {e:#}"))).transpose()?;
    if matches!(tool, "rping" | "ucmatose" | "udaddy") {
        let own = if tool == "udaddy" { sim::rxe::verbs::Conn::Ud } else { sim::rxe::verbs::Conn::Rc };
        anyhow::ensure!(asked.is_none_or(|c| c == own), "{tool} is {own}");
        return Ok(own);
    }
    if let Some(own) = pingpong::tool_conn(tool) {
        if let Some(c) = asked {
            anyhow::ensure!(c == own, "{tool} is {own}, not --conn {c} (ibv_rc_pingpong is RC, ibv_uc_pingpong UC, ibv_ud_pingpong UD)");
        }
        return Ok(own);
    }
    let c = asked.unwrap_or_default();
    perftest::Tool::parse(tool).with_context(|| format!("unknown tool `{tool}`"))?.check_conn(c)?;
    Ok(c)
}

/// `rnic rxe --tool rping|ucmatose|udaddy`: the librdmacm tool in the VM against our CM agent and our peer of
/// the tool (RTL endpoint), connected through the CM (no TCP exchange). rping: `--role server` (our side
/// listens, the VM's `rping -c` connects) or `client` (ours connects to the VM's `rping -s`); `--iters` pings
/// (default 10) of `--size` bytes (default 64), each checked. ucmatose (two connections, ten messages each
/// way) and udaddy (SIDR, ten datagrams each way), both roles.
fn rxe_cm_tool(endpoint: sim::rxe::verbs::EndpointKind, tool: &str, role: &str, size: Option<usize>, iters: Option<usize>) -> Result<ExitCode> {
    anyhow::ensure!(endpoint == sim::rxe::verbs::EndpointKind::Rtl, "--tool {tool} runs with --endpoint rtl (the CM agent on QP1 needs the driver's GSI QP)");
    if tool == "ucmatose" && role == "client" {
        let p = sim::rxe::cm::probe_cmatose_client(&sim::rxe::build_vm()?, "ucmatose_client", 2)?;
        println!("--- VM: ucmatose, rc {:?}\n{}", p.server_rc, p.server_out);
        for (from_vm, m) in &p.mads {
            println!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
        }
        println!("our side: connections (received, replies, ended) {:?}, {:?}", p.connections, p.stats);
        p.error.iter().for_each(|e| println!("error: {e}"));
        let ok = p.error.is_none() && p.server_rc == Some(0) && p.connections.iter().all(|c| *c == (10, 10, true));
        println!("result: {}", if ok { "PASS" } else { "FAIL" });
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    if tool == "udaddy" && role == "client" {
        let p = sim::rxe::cm::probe_udaddy_client(&sim::rxe::build_vm()?, "udaddy_client")?;
        println!("--- VM: udaddy, rc {:?}\n{}", p.server_rc, p.server_out);
        for (from_vm, m) in &p.mads {
            println!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
        }
        println!("our side: {} sent, {} replies ({} bad), {:?}", p.sent, p.received, p.bad, p.stats);
        p.error.iter().for_each(|e| println!("error: {e}"));
        let ok = p.error.is_none() && p.server_rc == Some(0) && (p.sent, p.received, p.bad) == (10, 10, 0);
        println!("result: {}", if ok { "PASS" } else { "FAIL" });
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    if tool != "rping" {
        let image = sim::rxe::build_vm()?;
        let cmd = if tool == "ucmatose" { "ucmatose -s 10.0.0.2 -c 2" } else { "udaddy -s 10.0.0.2" };
        let p = sim::rxe::cm::probe(&image, &format!("{tool}_server"), &[(tool, cmd)])?;
        for (name, rc, text) in &p.clients {
            println!("--- VM: {name}, rc {rc:?}\n{text}");
        }
        for (from_vm, m) in &p.mads {
            println!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
        }
        println!("our side: ucmatose {:?}, udaddy {:?}, {:?}", p.cmatose, p.udaddy, p.stats);
        p.error.iter().for_each(|e| println!("error: {e}"));
        let ok = p.error.is_none() && p.clients.iter().all(|c| c.1 == Some(0));
        println!("result: {}", if ok { "PASS" } else { "FAIL" });
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let (count, size) = (iters.unwrap_or(10) as u32, size.unwrap_or(64) as u32);
    anyhow::ensure!((16..=65536).contains(&size), "rping's size is 16..=65536 bytes");
    let image = sim::rxe::build_vm()?;
    let ok = match role {
        "server" => {
            let cmd = format!("rping -c -a 10.0.0.2 -p {} -C {count} -S {size} -V -v", sim::rxe::cm::RPING_PORT);
            let p = sim::rxe::cm::probe(&image, "rping_server", &[("rping", &cmd)])?;
            for (name, rc, text) in &p.clients {
                println!("--- VM: {name}, rc {rc:?}\n{text}");
            }
            for (from_vm, m) in &p.mads {
                println!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
            }
            println!("our side: {} pings read, {:?}", p.pings.len(), p.stats);
            p.error.iter().for_each(|e| println!("error: {e}"));
            p.error.is_none() && p.clients.iter().all(|c| c.1 == Some(0)) && p.pings.len() == count as usize
        }
        "client" => {
            let p = sim::rxe::cm::probe_client(&image, "rping_client", count, size)?;
            println!("--- VM: rping -s, rc {:?}\n{}", p.server_rc, p.server_out);
            for (from_vm, m) in &p.mads {
                println!("{} {}", if *from_vm { "vm ->" } else { "-> vm" }, m.summary());
            }
            println!("our side: {} pings, {} mismatches, {:?}", p.pings, p.mismatches, p.stats);
            p.error.iter().for_each(|e| println!("error: {e}"));
            p.error.is_none() && p.server_rc == Some(0) && p.pings == count && p.mismatches == 0
        }
        r => anyhow::bail!("--role must be server or client, not `{r}`"),
    };
    println!("result: {}", if ok { "PASS" } else { "FAIL" });
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[allow(clippy::too_many_arguments)]
fn rxe(
    endpoint: &str,
    tool: &str,
    conn: sim::rxe::verbs::Conn,
    role: &str,
    mtu: u32,
    size: Option<usize>,
    iters: Option<usize>,
    drop: f64,
    seed: u64,
    pcap: Option<PathBuf>,
    ipv6: bool,
    vlan: Option<u16>,
    rdma_cm: bool,
) -> Result<ExitCode> {
    use sim::rxe::{perftest, pingpong};
    let endpoint: sim::rxe::verbs::EndpointKind = endpoint.parse()?;
    anyhow::ensure!((256..=4096).contains(&mtu) && mtu.is_power_of_two(), "--mtu must be 256, 512, 1024, 2048 or 4096");
    if matches!(tool, "rping" | "ucmatose" | "udaddy") {
        return rxe_cm_tool(endpoint, tool, role, size, iters);
    }
    anyhow::ensure!((0.0..1.0).contains(&drop), "--drop is a fraction in [0, 1)");
    if pingpong::tool_conn(tool).is_some() {
        anyhow::ensure!(!rdma_cm, "--rdma-cm goes with the perftest tools (the pingpong tools have no rdma_cm mode)");
        let mut o = pingpong::PingpongOpts {
            role: role.parse().map_err(|e| anyhow::anyhow!("--role: {e}"))?,
            mtu,
            drop,
            seed,
            pcap,
            iters: iters.unwrap_or(200) as u32,
            endpoint,
            conn,
            ipv6,
            vlan,
            ..Default::default()
        };
        match size {
            Some(s) => o.size = u32::try_from(s).context("--size")?,
            // ud_pingpong's own default (2048) is above the MTU at 1024: one packet of the path MTU
            None if conn == sim::rxe::verbs::Conn::Ud => o.size = mtu,
            None => {}
        }
        let r = pingpong::run_pingpong(&o)?;
        println!("{}", r.summary());
        return Ok(match r.check() {
            Ok(()) => {
                println!("result: PASS");
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("result: FAIL: {e:#}");
                ExitCode::FAILURE
            }
        });
    }
    anyhow::ensure!(vlan.is_none(), "--vlan runs the pingpong tools (ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong), not perftest");
    anyhow::ensure!(!ipv6, "--ipv6 runs the pingpong tools (ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong), not perftest");

    let t = perftest::Tool::parse(tool).with_context(|| format!("unknown tool `{tool}`"))?;
    let r = perftest::Role::parse(role).with_context(|| format!("--role must be server or client, not `{role}`"))?;
    let mut o = perftest::PerftestOpts::new(t, r);
    o.mtu = mtu;
    o.drop = drop;
    o.seed = seed;
    o.pcap = pcap;
    o.iters = iters.unwrap_or(200);
    o.endpoint = endpoint;
    o.conn = conn;
    o.rdma_cm = rdma_cm;
    match size {
        Some(s) => o.size = s,
        // perftest without -s on UD sends messages of the MTU ("Changing to this MTU")
        None if conn == sim::rxe::verbs::Conn::Ud => o.size = mtu as usize,
        None => {}
    }
    let rep = perftest::run_perftest(&o)?;
    println!("{rep}");
    println!("result: {}", if rep.ok() { "PASS" } else { "FAIL" });
    Ok(if rep.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// DMA memory mapped for the card (rings, buffers): hugepages where reserved.
const CARD_DMA_BYTES: usize = 256 << 20;

/// The card's register BAR and DMA memory through VFIO.
fn card_open(dev: &DevArgs) -> Result<(rnic_driver::vfio::VfioBar, rnic_driver::vfio::VfioDma)> {
    let bar = card_bar(dev)?;
    let dma = bar.vfio().dma(CARD_DMA_BYTES)?;
    let (n, huge) = dma.size();
    println!("dma     {} MiB mapped through the IOMMU at IOVA {:#x} ({})", n >> 20, rnic_driver::vfio::DMA_IOVA_BASE, if huge { "hugepages" } else { "4 KiB pages: reserve hugepages for fewer IOMMU entries" });
    Ok((bar, dma))
}

/// `rnic rxe --endpoint board --pci BDF --peer IP`: the tool peers over the card against a tool started on a
/// remote rxe host.
#[allow(clippy::too_many_arguments)]
fn rxe_card(dev: &DevArgs, peer: std::net::Ipv4Addr, port: u16, tool: &str, conn: sim::rxe::verbs::Conn, role: &str, mtu: u32, size: Option<usize>, iters: Option<usize>) -> Result<ExitCode> {
    use sim::rxe::{card_ep, perftest, pingpong};
    let (mut bar, dma) = card_open(dev)?;
    let p = sim::bringup::probe(&mut bar)?;
    anyhow::ensure!(p.problems().is_empty(), "the card is not ready for traffic:\n{p}");
    let our_ip = std::net::Ipv4Addr::from(rnic_driver::CsrBus::read32(&mut bar, rnic_driver::host::REG_IPV4).map_err(|e| anyhow::anyhow!("{e}"))?);
    anyhow::ensure!(!our_ip.is_unspecified(), "the card has no address: `rnic board address --pci BDF --ip A.B.C.D` first");
    let d: sim::rxe::verbs::Dev = std::sync::Arc::new(card_ep::CardDevice::open(
        bar,
        std::sync::Arc::new(std::sync::Mutex::new(dma)),
        "the card (VFIO)",
        Box::new(|_, _| ()),
    )?);
    let mut tell = |c: &str| println!("on the rxe host {peer}, run:\n  {c}");
    if pingpong::tool_conn(tool).is_some() {
        let o = pingpong::PingpongOpts {
            role: role.parse().map_err(|e| anyhow::anyhow!("--role: {e}"))?,
            mtu,
            conn,
            port,
            size: size.map_or(4096, |s| s as u32),
            iters: iters.unwrap_or(1000) as u32,
            endpoint: sim::rxe::verbs::EndpointKind::Card,
            timeout: std::time::Duration::from_secs(120),
            ..Default::default()
        };
        let r = card_ep::pingpong_remote(&o, d.clone(), our_ip, peer, &mut tell)?;
        for l in &r.lines {
            println!("  {l}");
        }
        println!("peer MAC {}", r.peer_mac.map_or("-".into(), |m| m.to_string()));
        return Ok(match &r.error {
            None => {
                println!("result: PASS");
                ExitCode::SUCCESS
            }
            Some(e) => {
                println!("result: FAIL: {e}");
                ExitCode::FAILURE
            }
        });
    }
    let t = perftest::Tool::parse(tool).with_context(|| format!("unknown tool `{tool}`"))?;
    let r = perftest::Role::parse(role).with_context(|| format!("--role must be server or client, not `{role}`"))?;
    let mut o = perftest::PerftestOpts::new(t, r);
    o.mtu = mtu;
    o.port = port;
    o.iters = iters.unwrap_or(1000);
    o.endpoint = sim::rxe::verbs::EndpointKind::Card;
    o.conn = conn;
    o.timeout = std::time::Duration::from_secs(120);
    if let Some(s) = size {
        o.size = s;
    }
    let r = card_ep::perftest_remote(&o, &d, our_ip, peer, &mut tell)?;
    println!(
        "ours: completed {} {}; QPN {:#x} <-> {:#x}, MTU {}, {} messages, {} bytes, {} completions ({} bad), {:.3} s, {:.2} MB/s; peer MAC {}",
        r.completed,
        r.error.as_deref().unwrap_or(""),
        r.our_qpn,
        r.remote_qpn,
        r.path_mtu,
        r.messages,
        r.bytes,
        r.completions,
        r.bad_completions.len(),
        r.elapsed.as_secs_f64(),
        r.bw_mbs,
        r.peer_mac.map_or("-".into(), |m| m.to_string())
    );
    let ok = r.completed && r.bad_completions.is_empty() && r.unexpected_drops.is_empty();
    println!("result: {}", if ok { "PASS" } else { "FAIL" });
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The card's register BAR through VFIO, after the checks that name what is missing.
fn card_bar(dev: &DevArgs) -> Result<rnic_driver::vfio::VfioBar> {
    use rnic_driver::pci;
    let cards = pci::find_cards(&pci::sysfs_root())?;
    let card = pci::select(&cards, dev.pci.as_deref())?;
    pci::preflight(&card, Path::new("/dev"))?;
    println!("card    {} ({:04x}:{:04x}), IOMMU group {}, BAR{} {} MiB", card.bdf, card.vendor, card.device, card.iommu_group.unwrap_or(0), pci::REG_BAR, card.bars[pci::REG_BAR] >> 20);
    rnic_driver::vfio::VfioBar::open(rnic_driver::vfio::Real, Path::new("/dev"), card.iommu_group.unwrap_or(0), &card.bdf, pci::REG_BAR as u32)
}

fn board_probe(dev: &DevArgs) -> Result<ExitCode> {
    let p = if dev.sim {
        println!("card    the simulated board (U250 board shell, PCIe bridge and CMAC models)");
        sim::bringup::probe(sim::bringup::SimBoard::open()?.drv.bus())?
    } else {
        sim::bringup::probe(&mut card_bar(dev)?)?
    };
    print!("{p}");
    Ok(if p.problems().is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn board_stats(dev: &DevArgs) -> Result<ExitCode> {
    let st = if dev.sim { sim::bringup::stats(sim::bringup::SimBoard::open()?.drv.bus())? } else { sim::bringup::stats(&mut card_bar(dev)?)? };
    for (n, v) in st {
        println!("{n:<28} {v:>12}");
    }
    Ok(ExitCode::SUCCESS)
}

fn board_address(dev: &DevArgs, ip: std::net::Ipv4Addr, mac: Option<&str>) -> Result<ExitCode> {
    let mac = match mac {
        Some(m) => sim::bringup::parse_mac(m)?,
        None => {
            let o = ip.octets();
            [0x02, 0x00, o[0], o[1], o[2], o[3]]
        }
    };
    let set = |bus: &mut dyn rnic_driver::CsrBus| sim::bringup::set_address(bus, mac, ip);
    if dev.sim {
        set(sim::bringup::SimBoard::open()?.drv.bus())?
    } else {
        set(&mut card_bar(dev)?)?
    };
    println!("address MAC {}, IPv4 {ip}", mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"));
    Ok(ExitCode::SUCCESS)
}

fn board_arp(dev: &DevArgs, ip: std::net::Ipv4Addr) -> Result<ExitCode> {
    let r = if dev.sim {
        let mut b = sim::bringup::SimBoard::open()?;
        let (mac, addr) = b.neighbour();
        println!("card    the simulated board; on its link the host {addr} at {mac} answers ARP for its address");
        b.resolve(ip)
    } else {
        let mem = std::sync::Arc::new(std::sync::Mutex::new(rnic_driver::HostMemory::new()));
        let mut drv = rnic_driver::Driver::open(card_bar(dev)?, mem).map_err(|e| anyhow::anyhow!("the driver on the card: {e}"))?;
        drv.resolve(ip, &mut || std::thread::sleep(std::time::Duration::from_millis(1)))
    };
    match r {
        Ok(m) => {
            println!("arp     {ip} is at {m}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("arp     {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn board_selftest(dev: &DevArgs) -> Result<ExitCode> {
    let t = if dev.sim {
        sim::bringup::SimBoard::open()?.selftest()?
    } else {
        let (bar, dma) = card_open(dev)?;
        let mem = std::sync::Arc::new(std::sync::Mutex::new(dma));
        let mut drv = rnic_driver::Driver::open(bar, mem.clone()).map_err(|e| anyhow::anyhow!("the driver on the card: {e}"))?;
        sim::bringup::selftest(&mut drv, &mem, &mut || std::thread::sleep(std::time::Duration::from_millis(1)))?
    };
    println!("{t}");
    Ok(if t.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn board_build(board: &str, out: &Path) -> Result<ExitCode> {
    anyhow::ensure!(board == "u250", "--board: the boards are: u250");
    let files = fpga::board::vivado::write_all(out).with_context(|| format!("writing into {}", out.display()))?;
    println!("rnic board build: {} in {}", files.join(", "), out.display());
    let cmd = "vivado -mode batch -source build_u250.tcl";
    if std::process::Command::new("vivado").arg("-version").output().is_err() {
        println!("Vivado is not on PATH. On a machine with Vivado (and the free CMAC licence), run in {}:\n  {cmd}", out.display());
        println!("The flow and what it checks: {}", out.join("README.md").display());
        return Ok(ExitCode::SUCCESS);
    }
    println!("running: {cmd}");
    let st = std::process::Command::new("vivado")
        .args(["-mode", "batch", "-source", "build_u250.tcl"])
        .current_dir(out)
        .status()
        .context("running vivado")?;
    Ok(if st.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn scratch(tag: &str) -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("rnic-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

fn synth(only: Option<&str>) -> Result<ExitCode> {
    let dir = scratch("synth")?;
    fpga::gates::emit(&dir)?;
    println!("Yosys synth_xilinx -family xcup (resources) and synth; abc -lut 6; ltp -noff (depth)");
    println!("{:<16} {:>8} {:>7} {:>8} {:>7} {:>5} {:>5} {:>11}", "block", "LUT", "LUTRAM", "FF", "BRAM36", "URAM", "DSP", "LUT levels");
    let mut found = false;
    let mut over = Vec::new();
    for b in fpga::blocks() {
        if only.is_some_and(|o| o != b.name) {
            continue;
        }
        found = true;
        let r = fpga::gates::synth(&dir.join(format!("{}.v", b.name)))?;
        println!(
            "{:<16} {:>8} {:>7} {:>8} {:>7.1} {:>5} {:>5} {:>11}",
            b.name, r.luts, r.lutram, r.ffs, r.bram36, r.uram, r.dsp, r.lut_levels
        );
        if b.depth_budget.is_some_and(|d| r.lut_levels > d) {
            over.push((b.name, r.lut_levels, r.worst_path));
        }
    }
    // where the levels go in a block over its budget: the nets of its worst path
    for (name, levels, path) in over {
        println!("{name}: {levels} LUT levels, over the budget; its worst path:");
        for n in path {
            println!("  {n}");
        }
    }
    anyhow::ensure!(found, "no block named {}", only.unwrap_or_default());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ExitCode::SUCCESS)
}

fn demo(n: usize, clock_mhz: f64, vcd: Option<&Path>) -> Result<ExitCode> {
    println!("== 1. A real Linux rxe capture through the RTL ICRC engine (Verilator model of the emitted Verilog)");
    let report = testbench::decode::decode_bytes(RXE_CAPTURE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let records = pcap_frames(RXE_CAPTURE)?;
    let mut inputs = Vec::new();
    let mut expect = Vec::new();
    let mut names = Vec::new();
    for (i, frame) in records.iter().enumerate() {
        if let Ok(Frame::Roce(f)) = parse_ethernet(frame) {
            let mut g = f.clone();
            g.eth_trailer = Some(Vec::new());
            let mut bytes = g.build()?;
            bytes.truncate(bytes.len() - 4);
            inputs.push(bytes);
            expect.push(f.wire_icrc()?);
            names.push((i + 1, f.packet.opcode().map(|o| o.name().to_string()).unwrap_or_default(), frame.len()));
        }
    }
    let mut v = VerilatorIcrc::new(vcd.map(|p| p.to_str().unwrap_or("rnic.vcd")));
    let run = run_lockstep(&mut [&mut v as &mut dyn IcrcDut], &inputs, 1);
    println!("{:>3}  {:<28} {:>5}  {:>10}  {:>10}  verdict", "#", "opcode", "bytes", "on wire", "RTL");
    let mut bad = 0;
    for (k, (num, name, len)) in names.iter().enumerate() {
        let ok = run.crcs[k] == expect[k];
        bad += usize::from(!ok);
        println!(
            "{num:>3}  {name:<28} {len:>5}  {:>10}  {:>10}  {}",
            hex_le(expect[k]),
            hex_le(run.crcs[k]),
            if ok { "match" } else { "MISMATCH" }
        );
    }
    println!("decoder: {} frames, {} RoCEv2, every ICRC good: {}", report.frames, report.roce_frames, report.ok());

    let slice_ok = demo_rnic(clock_mhz)? & demo_pair(clock_mhz)?;

    println!("\n== 4. {n} random RoCEv2 frames (payload 0-4200 B, IPv4/IPv6, VLAN) back to back through the engine");
    let mut rng = SmallRng::seed_from_u64(2026);
    let pb = ProgressBar::new(n as u64).with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} frames {elapsed}").unwrap());
    let (frames, want): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| {
            pb.inc(1);
            let len = rand::Rng::gen_range(&mut rng, 0..=4200);
            random_roce_frame(&mut rng, len, false)
        })
        .unzip();
    pb.finish_and_clear();
    let t = Instant::now();
    let mut v = VerilatorIcrc::new(None);
    let mut got = Vec::with_capacity(n);
    let mut cycles = 0u64;
    let mut beats = 0u64;
    let mut bytes = 0u64;
    for f in &frames {
        let k = f.len().div_ceil(64);
        for (i, c) in f.chunks(64).enumerate() {
            let (ready, cv, crc) = v.drive(c, i + 1 == k, true, true);
            anyhow::ensure!(ready, "engine stalled its input");
            if cv {
                got.push(crc);
            }
            v.tick();
            cycles += 1;
            beats += 1;
            bytes += c.len() as u64;
        }
    }
    while got.len() < n {
        let (_, cv, crc) = v.drive(&[], false, false, true);
        if cv {
            got.push(crc);
        }
        v.tick();
        cycles += 1;
        anyhow::ensure!(cycles < beats + 100, "results stopped coming");
    }
    let secs = t.elapsed().as_secs_f64();
    let mismatches = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    println!("frames {n}, beats {beats}, cycles {cycles} (pipeline latency included), mismatches {mismatches}");
    println!(
        "engine throughput at {clock_mhz} MHz: {:.1} Gb/s of frame data ({:.3} beats/cycle)",
        bytes as f64 * 8.0 / (cycles as f64 / (clock_mhz * 1e6)) / 1e9,
        beats as f64 / cycles as f64
    );
    println!("Verilator speed: {:.2} M cycles/s", cycles as f64 / secs / 1e6);
    let all_ok = bad == 0 && mismatches == 0 && report.ok() && slice_ok;
    println!("\nresult: {}", if all_ok { "PASS" } else { "FAIL" });
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Go-back-N passes started (`comp_retries`) and frames dropped by RX Parse (`rx_drop_*`) at the RNIC behind
/// `drv`, from its counter window.
fn recovery<B: rnic_driver::CsrBus>(drv: &mut rnic_driver::Driver<B>) -> Result<(u64, u64)> {
    let w = sim::rxe::rtl_ep::read_counter_window(drv)?;
    let rx_drops = w.iter().filter(|(n, _)| n.starts_with("rx_drop")).map(|(_, v)| *v).sum();
    Ok((sim::rxe::rtl_ep::counter(&w, "comp_retries"), rx_drops))
}

/// Watch `wr_ids` (with their local buffers) on the CQ `cq` of `drv`'s system: its CQE monitor then counts
/// (`cqe_order.cqes_seen`) each one's CQE in the cycle the RNIC writes it to host memory.
fn watch_cqes<D: sim::system::RnicDut>(
    sys: &std::cell::RefCell<sim::system::System<D>>,
    drv: &rnic_driver::Driver<sim::system::SimBus<D>>,
    cq: testbench::model::Cq,
    bufs: impl Iterator<Item = (u64, (u64, u64))>,
) -> Result<()> {
    let ring = drv.cq_ring(cq).context("no such CQ")?;
    let mut s = sys.borrow_mut();
    s.cqe_order.rings.push(ring);
    s.cqe_order.watch.extend(bufs);
    Ok(())
}

/// Section 2 of the demo: the whole RNIC (Verilator model of the emitted top) driven by the driver through its
/// register slave, host memory behind its DMA ports (500 ns latency), a paced 100G link to the golden model as
/// the peer. Every message is checked in the peer's memory (or receive completion) and by its CQE; the link is
/// clean, so a point passes only if nothing was dropped, NAKed or retransmitted.
fn demo_rnic(clock_mhz: f64) -> Result<bool> {
    use testbench::model::{Cq, RecvWr, SendWr, Sge, WcStatus, WrOpcode};
    println!("\n== 2. The RNIC (Verilator model of the whole top) sends RDMA WRITE and SEND to the golden model over a 100G link");
    let dir = std::env::temp_dir().join(format!("rnic-demo-{}", std::process::id()));
    println!("{:<10} {:>5} {:>9} {:>7} {:>9} {:>10}  {}", "verb", "MTU", "bytes", "frames", "cycles", "Gb/s", "check");
    let mut all = true;
    let t = Instant::now();
    let mut total_cycles = 0u64;
    for (mtu, op, size, count) in [
        (4096u32, WrOpcode::RdmaWrite, 1u64 << 20, 1usize),
        (4096, WrOpcode::RdmaWrite, 65536, 16),
        (1024, WrOpcode::RdmaWrite, 4096, 64),
        (4096, WrOpcode::Send, 4096, 16),
        (1024, WrOpcode::RdmaWriteWithImm, 1025, 8),
    ] {
        let mut r = sim::system::rig(mtu, &dir.join(format!("{op:?}-{mtu}-{size}")));
        let peer_qpn = r.peer_qpn;
        // the rig's one CQ (Cq(0)) gets our send completions; the clock stops when the last is in host memory
        watch_cqes(&r.sys, &r.drv, Cq(0), (0..count as u64).map(|i| (i, (r.src + i * size, size))))?;
        if op != WrOpcode::RdmaWrite {
            let mut s = r.sys.borrow_mut();
            for i in 0..count as u64 {
                let sg = if op == WrOpcode::Send { vec![Sge { addr: r.peer_buf + i * size, length: size as u32, lkey: r.peer_rkey }] } else { vec![] };
                s.peer.post_recv(peer_qpn, RecvWr { wr_id: i, sg_list: sg }).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        let (c0, f0) = { let s = r.sys.borrow(); (s.cycle, s.sent.len()) };
        for i in 0..count as u64 {
            let mut wr = SendWr::new(i, op, vec![Sge { addr: r.src + i * size, length: size as u32, lkey: r.lkey }]);
            wr.remote_addr = r.peer_buf + i * size;
            wr.rkey = r.peer_rkey;
            wr.imm_data = 0x1000 + i as u32;
            r.drv.post_send(r.qpn, &wr).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let done = r.sys.borrow_mut().run_until(20_000_000, |s| s.cqe_order.cqes_seen >= count as u64);
        let mut fails = Vec::new();
        let (cycles, frames) = {
            let s = r.sys.borrow();
            total_cycles += s.cycle;
            let (drops, naks) = (s.peer.counters().total_drops(), s.peer.counters().naks_sent_total());
            if !done {
                fails.push(format!("{} of {count} CQEs", s.cqe_order.cqes_seen));
            }
            if drops + naks != 0 {
                fails.push(format!("peer: {drops} drops, {naks} NAKs"));
            }
            if s.out.underruns != 0 {
                fails.push("TX underrun".into());
            }
            let mem = r.mem.lock().unwrap();
            let mut same = true;
            for i in 0..count as u64 {
                let want = mem.read(r.src + i * size, size as usize).map_err(|e| anyhow::anyhow!("{e}"))?;
                let got = s.peer.mem().read(r.peer_buf + i * size, size as usize).map_err(|e| anyhow::anyhow!("{e}"))?;
                same &= want == got;
            }
            if !same {
                fails.push("peer memory differs".into());
            }
            (s.cycle - c0, s.sent.len() - f0)
        };
        let ours = r.drv.poll_cq(Cq(0), 2 * count).map_err(|e| anyhow::anyhow!("{e}"))?;
        if ours.len() != count || !ours.iter().all(|w| w.status == WcStatus::Success) {
            fails.push("our CQEs".into());
        }
        if op != WrOpcode::RdmaWrite {
            let wcs = r.wait_peer_completions(count, 1000);
            if wcs.len() != count || !wcs.iter().all(|w| w.status == WcStatus::Success) {
                fails.push("peer completions".into());
            }
        }
        let (gbn, rx_drops) = recovery(&mut r.drv)?;
        if gbn + rx_drops != 0 {
            fails.push(format!("{gbn} go-back-N, {rx_drops} RX drops"));
        }
        let gbps = (count as u64 * size) as f64 * 8.0 / (cycles as f64 / (clock_mhz * 1e6)) / 1e9;
        println!(
            "{:<10} {:>5} {:>9} {:>7} {:>9} {:>10.1}  {}",
            format!("{op:?}").replace("Rdma", ""),
            mtu,
            count as u64 * size,
            frames,
            cycles,
            gbps,
            if fails.is_empty() { "peer memory matches".to_string() } else { format!("FAILED: {}", fails.join(", ")) }
        );
        all &= fails.is_empty();
    }
    println!("(cycles from the first doorbell write to our last CQE written to host memory, host memory 500 ns away; goodput at {clock_mhz} MHz)");
    println!("Verilator speed: {:.3} M cycles/s of the whole RNIC; pcaps (one per direction) under {}", total_cycles as f64 / t.elapsed().as_secs_f64() / 1e6, dir.display());
    Ok(all)
}

/// Section 3 of the demo: two RNICs (`sim::pair::PairRig`) exchange every verb with a receive side; every
/// byte and completion checked. A point that needed go-back-N (a frame RX Parse dropped for lack of room,
/// resent) still passes, but says so, and its cycles include the recovery.
fn demo_pair(clock_mhz: f64) -> Result<bool> {
    use testbench::model::{RecvWr, SendWr, Sge, WcStatus, WrOpcode};
    println!("\n== 3. Two RNICs (both Verilator models of the whole top, each with its own driver and host memory) on one 100G link");
    let dir = std::env::temp_dir().join(format!("rnic-demo-pair-{}", std::process::id()));
    println!("{:<12} {:>5} {:>9} {:>6} {:>6} {:>9} {:>7}  {}", "verb A->B", "MTU", "bytes", "A->B", "B->A", "cycles", "Gb/s", "check");
    let t = Instant::now();
    let mut total_cycles = 0u64;
    let mut all = true;
    let mut recovered = 0;
    for (mtu, op, size, count) in [
        (4096u32, WrOpcode::RdmaWrite, 1u64 << 20, 1usize),
        (4096, WrOpcode::RdmaWrite, 65536, 16),
        (4096, WrOpcode::RdmaWrite, 4096, 64),
        (4096, WrOpcode::RdmaRead, 1 << 20, 1),
        (4096, WrOpcode::RdmaRead, 65536, 16),
        (1024, WrOpcode::RdmaRead, 1024, 64),
        (4096, WrOpcode::Send, 262144, 4),
        (1024, WrOpcode::SendWithImm, 1025, 8),
        (1024, WrOpcode::RdmaWriteWithImm, 1025, 8),
        (256, WrOpcode::Send, 0, 8),
    ] {
        let half = (count as u64 * size).max(4096).next_power_of_two();
        let name = format!("{op:?}-{mtu}-{size}x{count}");
        let mut r = sim::pair::PairRig::new(mtu, 2 * half, &dir.join(&name))?;
        let consumes = matches!(op, WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm);
        if consumes {
            for i in 0..count as u64 {
                let sg = vec![Sge { addr: r.b.buf + half + i * size, length: size as u32, lkey: r.b.key }];
                r.b.drv.post_recv(r.b.qpn, &RecvWr { wr_id: 100 + i, sg_list: sg }).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        let read = op == WrOpcode::RdmaRead;
        let abuf = r.a.buf;
        let local = move |i: u64| if read { abuf + half + i * size } else { abuf + i * size };
        // A's CQE monitor stops the clock in the cycle A's last CQE is written to its host memory (and checks
        // that no READ data lands in a buffer after its CQE)
        watch_cqes(&r.a.sys, &r.a.drv, r.a.cq, (0..count as u64).map(|i| (i, (local(i), size))))?;
        let c0 = r.cycle();
        for i in 0..count as u64 {
            let mut wr = SendWr::new(i, op, vec![Sge { addr: local(i), length: size as u32, lkey: r.a.key }]);
            wr.remote_addr = if read { r.b.buf + i * size } else { r.b.buf + half + i * size };
            wr.rkey = r.b.key;
            wr.imm_data = 0x1000 + i as u32;
            r.a.drv.post_send(r.a.qpn, &wr).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        r.a.sys.borrow_mut().run_until(2_000_000, |s| s.cqe_order.cqes_seen >= count as u64);
        let cycles = r.cycle() - c0;
        total_cycles += r.cycle();
        let wcs = r.a.wait(count, 1_000);
        let mut ok = wcs.len() == count && wcs.iter().all(|w| w.status == WcStatus::Success);
        ok &= r.a.sys.borrow().cqe_order.violations.is_empty();
        if consumes {
            let got = r.b.wait(count, 1_000_000);
            ok &= got.len() == count && got.iter().all(|w| w.status == WcStatus::Success);
        }
        let (ma, mb) = (r.a.mem.lock().unwrap(), r.b.mem.lock().unwrap());
        let n = (count as u64 * size) as usize;
        let (src, dst) = if read {
            (mb.read(r.b.buf, n), ma.read(r.a.buf + half, n))
        } else {
            (ma.read(r.a.buf, n), mb.read(r.b.buf + half, n))
        };
        ok &= matches!((&src, &dst), (Ok(x), Ok(y)) if x == y);
        drop((ma, mb));
        let (fa, fb) = (r.a.sys.borrow().frames_out, r.b.sys.borrow().frames_out);
        ok &= r.a.sys.borrow().out.underruns == 0 && r.b.sys.borrow().out.underruns == 0;
        // what it took: go-back-N passes and RX Parse drops, both sides
        let ((ga, da), (gb, db)) = (recovery(&mut r.a.drv)?, recovery(&mut r.b.drv)?);
        let (gbn, drops) = (ga + gb, da + db);
        let check = match (ok, gbn + drops) {
            (false, _) => "FAILED".to_string(),
            (true, 0) => "ok".to_string(),
            (true, _) => {
                recovered += 1;
                format!("ok (recovered: {gbn} go-back-N, {drops} RX drops)")
            }
        };
        let gbps = n as f64 * 8.0 / (cycles as f64 / (clock_mhz * 1e6)) / 1e9;
        println!(
            "{:<12} {:>5} {:>9} {:>6} {:>6} {:>9} {:>7.1}  {check}",
            format!("{op:?}").replace("Rdma", ""),
            mtu,
            n,
            fa,
            fb,
            cycles,
            gbps,
        );
        all &= ok;
    }
    println!("(check: every byte and completion; cycles from A's first doorbell to A's last CQE written to host memory; goodput at {clock_mhz} MHz; host memory 500 ns away on both sides)");
    if recovered != 0 {
        println!("({recovered} point(s) completed only by recovery: frames dropped at RX and resent by go-back-N; their cycles include it)");
    }
    let pair = total_cycles as f64 / t.elapsed().as_secs_f64() / 1e6;
    println!("Verilator speed: {pair:.3} M cycles/s of both RNICs in one thread ({:.3} M cycles/s of RNIC); pcaps of both MACs under {}", 2.0 * pair, dir.display());
    Ok(all)
}

/// The ICRC as its wire bytes (least significant first), as Wireshark shows them.
fn hex_le(v: u32) -> String {
    v.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn pcap_frames(data: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut r = pcap_file::pcap::PcapReader::new(data).context("reading the pcap")?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.context("pcap record")?.data.to_vec());
    }
    Ok(out)
}
