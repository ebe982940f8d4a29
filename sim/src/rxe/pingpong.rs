//! An `ibv_rc_pingpong` / `ibv_uc_pingpong` / `ibv_ud_pingpong` peer on our side of the rxe link: the golden
//! model ([`testbench::model::Device`]) speaks rdma-core's `libibverbs/examples/rc_pingpong.c` (or
//! `uc_pingpong.c`, `ud_pingpong.c`) protocol to the stock tool in the VM, in either role.
//!
//! The protocol, as rc_pingpong does it:
//! * both sides create a PD, one buffer of `size` bytes (an MR with LOCAL_WRITE), one CQ for sends and
//!   receives, an RC QP (INIT with access flags 0) and post `rx_depth` receives of `size` bytes (wr_id 1);
//! * the out-of-band exchange on TCP 18515: the client connects and writes its 52-byte record
//!   `"%04x:%06x:%06x:%s\0"` (LID:QPN:PSN:GID, the GID as its 16 bytes in hex); the server reads it, moves its
//!   QP to RTR/RTS, writes its own record; the client reads it and writes `"done\0"` (5 bytes), then moves
//!   its QP to RTR/RTS (path MTU `-m`, `max_dest_rd_atomic` 1, `min_rnr_timer` 12, timeout 14, `retry_cnt`
//!   7, `rnr_retry` 7, `max_rd_atomic` 1);
//! * the client posts the first SEND (wr_id 2, signaled); from then on, each side posts its next SEND once both
//!   its previous SEND and a RECV have completed (the server: once a RECV has completed), until `iters`
//!   SENDs and `iters` RECVs completed; receives are topped up to `rx_depth` when at most one is left.
//!
//! `uc_pingpong.c` ([`PingpongOpts::conn`] = [`Conn::Uc`]) is the same exchange, buffers and loop over a UC
//! QP whose `pp_connect_ctx` sets only the path MTU, AV, destination QPN and RQ PSN at RTR and only the SQ PSN
//! at RTS (no `max_dest_rd_atomic`, `min_rnr_timer`, timeout, retry counts or `max_rd_atomic`). A UC SEND
//! completes once sent and nothing is ACKed; a SEND that finds no receive is dropped (no RNR NAK), which
//! the loop never risks: each side sends only after the peer's previous SEND arrived, and keeps `rx_depth`
//! receives posted. A lost packet loses its message for good and both tools wait forever, so UC runs take
//! no drops.
//!
//! `ud_pingpong.c` ([`Conn::Ud`]) exchanges the same
//! 52-byte record, but its QP is UD: INIT with P_Key index 0, the port and Q_Key 0x11111111 (no access
//! flags), RTR with the state alone, RTS with the SQ PSN alone; then it creates an address handle from the
//! peer's record (`is_global` with the peer's GID, `hop_limit` 1, our GID index) — the server before it
//! writes its record, the client after the exchange. Its buffer is `size + 40` bytes (an MR with
//! LOCAL_WRITE): every receive takes the whole buffer (`size + 40`: rxe writes the 40-byte GRH area first),
//! every SEND goes from `buf + 40` (`size` bytes) to the peer's QPN with Q_Key 0x11111111. A message is one
//! packet: the tool refuses a `size` above the port's active MTU, and it has no `-m` (the path is the active
//! MTU: 1024 with the VM's netdev MTU 1500, 4096 with 9000). Same loop and iteration counts as rc_pingpong.
//! Our side does the same and checks every receive ([`super::ud::UdRecvCheck`]: `byte_len` = size + 40,
//! `src_qp` = the tool's QPN, `IBV_WC_GRH`, the GRH area = 20 zero bytes and the frame's IPv4 header, the
//! payload the tool's 0x7b bytes).
//!
//! [`run_pingpong`] boots the VM with `sim/vm/scripts/pingpong-vm.sh` (the tool in the opposite role), runs
//! our side in the calling thread against our endpoint shared with the bridge thread ([`super::verbs::Verbs`]: the golden model or the RTL), then
//! collects the tool's output, rxe's `hw_counters`, the bridge statistics and a check of the pcap (golden
//! decoder, retransmitted PSNs). [`PingpongReport::check`] says whether the run is a clean pass.
//!
//! The options map to `rnic rxe --endpoint model --tool ibv_rc_pingpong|ibv_uc_pingpong --role server|client
//! --mtu N --size N --iters N --drop P --pcap FILE`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use testbench::model::{
    AccessFlags, AddressVector, Counters, Cq, DeviceConfig, DropReason, QpAttr, QpCap, QpInitAttr,
    QpState, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus, WrOpcode,
};
use testbench::wire::{parse_ethernet, Frame};

use super::oob::{Listening, Oob};
use super::ud::{UdRecvCheck, UdWire};
use super::verbs::{open_endpoint_with, Conn, Dev, EndpointKind, UD_GRH_ROOM, UD_QKEY};
use super::{
    ipv6_prelude, BridgeConfig, BridgeStats, HostConfig, HostStack, Session, VmConfig, VmImage, GID_SCRIPT, LAB_OUR_IP6,
    LAB_VM_IP6,
};

/// rc_pingpong's default TCP port.
pub const PINGPONG_PORT: u16 = 18515;
/// Length of the exchanged record: `sizeof "0000:000000:000000:00000000000000000000000000000000"`.
pub const RECORD_LEN: usize = 52;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// The VM's script.
const VM_SCRIPT: &str = include_str!("../../vm/scripts/pingpong-vm.sh");

/// Which end of rc_pingpong OUR side plays (the VM plays the other one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// We listen on TCP 18515; the VM's tool connects to us as client (`ibv_rc_pingpong ... 10.0.0.2`).
    Server,
    /// The VM runs the tool as server; we connect to it.
    Client,
}

impl std::str::FromStr for Role {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "server" => Ok(Role::Server),
            "client" => Ok(Role::Client),
            _ => bail!("role must be server or client, not {s:?}"),
        }
    }
}

/// Options of one run.
#[derive(Clone, Debug)]
pub struct PingpongOpts {
    /// Our role.
    pub role: Role,
    /// Path MTU (`-m`): 256, 512, 1024, 2048 or 4096.
    pub mtu: u32,
    /// Message size (`-s`).
    pub size: u32,
    /// Number of exchanges (`-n`).
    pub iters: u32,
    /// Receives posted at a time (`-r`), both sides.
    pub rx_depth: u32,
    /// Bridge drop probability, each direction (`--drop`).
    pub drop: f64,
    /// Seed of the drops and of our PSN.
    pub seed: u64,
    /// pcap of the link; `None`: `<run dir>/link.pcap`.
    pub pcap: Option<PathBuf>,
    /// The whole run (VM boot included) is abandoned after this long.
    pub timeout: Duration,
    /// The VM's eth0 MTU; `None`: 1500 for a path MTU up to 1024, 9000 above (rxe's active MTU is the largest
    /// IB MTU <= netdev MTU - 80).
    pub vm_mtu: Option<u32>,
    /// Scratch directory name under `sim/vm/work/run/`.
    pub run_name: String,
    /// The VM image; `None`: [`super::build_vm`].
    pub image: Option<VmImage>,
    /// TCP port of the exchange.
    pub port: u16,
    /// Who plays our side: the golden model or the RTL.
    pub endpoint: EndpointKind,
    /// ICMP echo requests the VM sends to our address before the tool (`ping -c N`; 0: none). Our side's
    /// echo responder answers them: the RTL's own for an RTL endpoint, the host stack's for the model.
    pub pings: u32,
    /// The transport: RC runs `ibv_rc_pingpong`, UC `ibv_uc_pingpong`, UD `ibv_ud_pingpong` (both in the VM
    /// and as our QP's type).
    pub conn: Conn,
    /// RoCEv2 over IPv6: the VM's eth0 gets [`LAB_VM_IP6`]/64 and our side [`LAB_OUR_IP6`], and both tools use
    /// those addresses' GIDs (the exchange itself stays on IPv4). The VM asks our MAC by neighbour
    /// solicitation, answered by the RTL's ND responder (the host stack's for the model).
    pub ipv6: bool,
    /// On an 802.1Q VLAN with this VID (1..=4094): the VM's addresses on `eth0.VID` (rxe0 on eth0 takes its
    /// GIDs from there: rxe refuses a VLAN netdev), our port on the same VLAN (`CMD_SET_VLAN`), so that every RoCE, ARP and ND frame on the link is tagged. The exchange
    /// then runs over the VM's second NIC (the link's untagged side has no address). The RTL endpoint only.
    pub vlan: Option<u16>,
}

impl Default for PingpongOpts {
    /// rc_pingpong's defaults (path MTU 1024, 4096-byte messages, 1000 iterations, rx depth 500), our side
    /// server, no drops, 60 s.
    fn default() -> Self {
        PingpongOpts {
            role: Role::Server,
            mtu: 1024,
            size: 4096,
            iters: 1000,
            rx_depth: 500,
            drop: 0.0,
            seed: 1,
            pcap: None,
            timeout: Duration::from_secs(60),
            vm_mtu: None,
            run_name: "pingpong".into(),
            image: None,
            port: PINGPONG_PORT,
            endpoint: EndpointKind::Model,
            pings: 0,
            conn: Conn::Rc,
            ipv6: false,
            vlan: None,
        }
    }
}

/// The pingpong example of each transport: `ibv_rc_pingpong` is RC, `ibv_uc_pingpong` UC, `ibv_ud_pingpong`
/// UD (`None`: not a pingpong tool we run).
pub fn tool_conn(tool: &str) -> Option<Conn> {
    match tool {
        "ibv_rc_pingpong" => Some(Conn::Rc),
        "ibv_uc_pingpong" => Some(Conn::Uc),
        "ibv_ud_pingpong" => Some(Conn::Ud),
        _ => None,
    }
}

impl PingpongOpts {
    /// The rdma-core example of this transport.
    pub fn tool(&self) -> &'static str {
        match self.conn {
            Conn::Rc => "ibv_rc_pingpong",
            Conn::Uc => "ibv_uc_pingpong",
            Conn::Ud => "ibv_ud_pingpong",
        }
    }

    /// rxe's active MTU for the VM's netdev MTU: the largest IB MTU that fits the netdev MTU less the RoCEv2
    /// headers (1500: 1024, 9000: 4096).
    pub fn vm_active_mtu(&self) -> u32 {
        let room = self.vm_netdev_mtu().saturating_sub(80);
        [4096, 2048, 1024, 512, 256].into_iter().find(|&m| m <= room).unwrap_or(256)
    }

    /// Refuse what cannot run, before any VM starts.
    pub fn check(&self) -> Result<()> {
        ensure!(
            [256, 512, 1024, 2048, 4096].contains(&self.mtu),
            "path MTU must be 256, 512, 1024, 2048 or 4096"
        );
        ensure!(
            self.iters >= 1 && self.size >= 1 && self.rx_depth >= 2,
            "iters, size >= 1 and rx depth >= 2"
        );
        ensure!((0.0..1.0).contains(&self.drop), "drop must be in [0, 1)");
        ensure!(
            self.conn == Conn::Rc || self.drop == 0.0,
            "{} does not retransmit: a dropped packet loses its message and both {} peers wait for it forever; --drop needs RC",
            self.conn,
            self.tool()
        );
        if let Some(v) = self.vlan {
            ensure!((1..=4094).contains(&v), "--vlan: a VLAN ID is 1..=4094 (0 and 4095 are reserved), not {v}");
            ensure!(
                self.endpoint == EndpointKind::Rtl,
                "--vlan runs with the RTL endpoint (its VLAN Strip and Insert tag and filter every frame, ARP and ND included); not with {:?}",
                self.endpoint
            );
        }
        if self.conn == Conn::Ud {
            let active = self.vm_active_mtu();
            ensure!(
                self.mtu == active,
                "ibv_ud_pingpong has no -m: its path is rxe's active MTU, {active} with the VM's netdev MTU {} (1024 with 1500, 4096 with 9000); use --mtu 1024 or 4096, not {}",
                self.vm_netdev_mtu(),
                self.mtu
            );
            ensure!(
                self.size <= self.mtu,
                "a UD message is one packet: ibv_ud_pingpong refuses --size {} above the port MTU {} (\"Requested size larger than port MTU\")",
                self.size,
                self.mtu
            );
        }
        Ok(())
    }

    /// The VM's netdev MTU for this path MTU.
    pub fn vm_netdev_mtu(&self) -> u32 {
        self.vm_mtu
            .unwrap_or(if self.mtu <= 1024 { 1500 } else { 9000 })
    }
}

/// One side's record of the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
}

impl Dest {
    /// The 52-byte record, NUL-terminated, as rc_pingpong's `sprintf(msg, "%04x:%06x:%06x:%s", ...)`.
    pub fn to_wire(&self) -> [u8; RECORD_LEN] {
        let mut s = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn, self.psn);
        for b in self.gid {
            let _ = write!(s, "{b:02x}");
        }
        let mut out = [0u8; RECORD_LEN];
        out[..s.len()].copy_from_slice(s.as_bytes());
        out
    }

    /// Parse a record (`sscanf(msg, "%x:%x:%x:%s", ...)` + `wire_gid_to_gid`).
    pub fn from_wire(b: &[u8]) -> Result<Dest> {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        let s = std::str::from_utf8(&b[..end]).context("record is not ASCII")?;
        let f: Vec<&str> = s.split(':').collect();
        ensure!(f.len() == 4 && f[3].len() == 32, "bad record {s:?}");
        let hex = |x: &str| u32::from_str_radix(x, 16).with_context(|| format!("bad record {s:?}"));
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16)
                .with_context(|| format!("bad GID in {s:?}"))?;
        }
        Ok(Dest {
            lid: hex(f[0])? as u16,
            qpn: hex(f[1])?,
            psn: hex(f[2])?,
            gid,
        })
    }

    /// The GID as an IP address (IPv4 when v4-mapped).
    pub fn ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }
}

/// What our side did.
#[derive(Clone, Debug, Default)]
pub struct OurResult {
    pub local: Option<Dest>,
    pub remote: Option<Dest>,
    /// The peer's MAC our QP sends to (the RNIC's ARP answer, or the lab's known VM).
    pub peer_mac: Option<testbench::wire::MacAddr>,
    /// Successful SEND completions (rc_pingpong's `scnt`).
    pub sends: u32,
    /// Successful RECV completions (`rcnt`).
    pub recvs: u32,
    /// Bytes received in RECV completions.
    pub bytes_received: u64,
    /// `size * iters * 2`, as the tool reports it, once all iterations are done.
    pub bytes: u64,
    /// From the first SEND (or the exchange, for the server) to the last completion.
    pub elapsed: Duration,
    /// Why our side stopped early.
    pub error: Option<String>,
    /// rc_pingpong-style output lines.
    pub lines: Vec<String>,
    /// UD: the checks of every receive completion ([`UdRecvCheck`]).
    pub ud: Option<UdRecvCheck>,
}

/// The pcap, checked.
#[derive(Clone, Debug, Default)]
pub struct PcapCheck {
    pub path: PathBuf,
    pub frames: usize,
    pub roce_frames: usize,
    /// Golden decoder result (`decode_pcap(..).ok()`).
    pub decode_ok: bool,
    /// The decoder's problems, one line each.
    pub problems: Vec<String>,
    pub opcode_counts: BTreeMap<String, usize>,
    /// RoCE frames we sent (source 10.0.0.2) / the VM sent, as delivered (the pcap holds delivered frames).
    pub roce_to_vm: u64,
    pub roce_from_vm: u64,
    /// Request packets whose (source, destination QPN, PSN) appeared earlier in the capture: retransmissions.
    pub dup_requests_to_vm: u64,
    pub dup_requests_from_vm: u64,
    /// Our RoCE frames the VM never answered (see [`unanswered_tail`]): they may reach rxe after the tool has
    /// destroyed its QP.
    pub roce_to_vm_unanswered_tail: u64,
}

/// Everything about one run.
#[derive(Debug)]
pub struct PingpongReport {
    pub opts: PingpongOpts,
    /// The VM script's (= the tool's) exit status.
    pub vm_rc: Option<i32>,
    pub vm_timed_out: bool,
    /// The tool's output (between the script's markers).
    pub tool_output: String,
    pub vm_log_path: PathBuf,
    pub ours: OurResult,
    /// rxe's `/sys/class/infiniband/rxe0/ports/1/hw_counters/*` after the run.
    pub hw_counters: BTreeMap<String, u64>,
    /// rxe kernel messages (`dmesg | grep -i -e rxe -e icrc`).
    pub kmsgs: Vec<String>,
    /// rxe's active MTU as ibv_devinfo reported it.
    pub vm_active_mtu: Option<u32>,
    /// The VM's ping summary ("N packets transmitted, M received, ...") when it pinged us.
    pub ping: Option<String>,
    pub bridge: BridgeStats,
    pub bridge_error: Option<String>,
    /// How often the link paused the VM for our endpoint (RTL runs; see [`super::LinkPause`]).
    pub pause: Option<super::PauseStats>,
    /// The model's counters (zero when the RTL played our side).
    pub model: Counters,
    /// What played our side, and its counters by name.
    pub endpoint: String,
    pub endpoint_counters: Vec<(String, u64)>,
    /// Counters of frames our endpoint dropped that a lossless link cannot explain.
    pub unexpected_drops: Vec<(String, u64)>,
    pub pcap: Option<PcapCheck>,
    /// UD: the UD frames of the capture, both ways.
    pub ud_wire: Option<UdWire>,
    pub wall: Duration,
}

impl PingpongReport {
    fn hw(&self, name: &str) -> u64 {
        self.hw_counters.get(name).copied().unwrap_or(0)
    }

    /// Every reason this run is not a clean pass (empty: pass).
    ///
    /// rxe 6.1 `hw_counters` and what they must be:
    /// * `rcvd_pkts` counts what passed rxe's header checks **and the ICRC check** (`rxe_rcv`); rxe has no ICRC
    ///   error counter, so without drops every RoCE frame we delivered must be counted: `rcvd_pkts` = RoCE
    ///   frames to the VM in the pcap (a bad ICRC from us makes it smaller), except our frames after the last
    ///   one the VM answered ([`unanswered_tail`]), which may reach rxe after the tool destroyed its QP. Seen
    ///   with the RTL: rxe retransmitted its last SEND on its timer; we sent our last SEND and then re-ACKed
    ///   the duplicate's packets; the VM ACKed our SEND, the tool exited, and the three re-ACKs queued behind
    ///   our SEND (before the VM's last frame in the capture) found no QP. With drops, a retransmission can
    ///   reach a QP the tool already destroyed, so there it may only be smaller by that tail.
    /// * `rcvd_seq_err` (rxe's requester got a PSN-sequence NAK from us) and `out_of_seq_request` (rxe's
    ///   responder saw a PSN gap in our requests): a lost frame causes them, so they must be 0 without drops.
    /// * `rcvd_rnr_err` / `send_rnr_err`: both sides keep `rx_depth` receives posted, so 0.
    /// * `retry_exceeded_err`, `retry_rnr_exceeded_err`, `send_err`, `link_downed`: always 0.
    /// * `duplicate_request` and `completer_retry_err` are NOT required to be 0: under TCG the VM can stall
    ///   longer than the 67 ms ACK timeout (timeout 14), so either side may retransmit a packet that was not
    ///   lost; that is timing, not an error on the wire.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let o = &self.opts;
        if self.vm_timed_out {
            p.push("the VM timed out".into());
        }
        if self.vm_rc != Some(0) {
            p.push(format!("{} exited with {:?}", o.tool(), self.vm_rc));
        }
        if o.pings > 0 {
            // "5 packets transmitted, 5 packets received, 0% packet loss" (busybox; iputils: "5 received")
            let counts: Vec<Option<u32>> = self
                .ping
                .as_deref()
                .unwrap_or("")
                .split(", ")
                .take(2)
                .map(|f| f.split_whitespace().next().and_then(|n| n.parse().ok()))
                .collect();
            if counts != [Some(o.pings), Some(o.pings)] {
                p.push(format!("ping: {n} echo requests sent and {n} replies expected, the VM said {:?}", self.ping, n = o.pings));
            }
        }
        if !self.tool_output.contains(&format!("{} iters in", o.iters)) {
            p.push(format!("{} did not report its iterations", o.tool()));
        }
        if let Some(e) = &self.ours.error {
            p.push(format!("our side: {e}"));
        }
        if self.ours.sends != o.iters || self.ours.recvs != o.iters {
            p.push(format!(
                "our side completed {} sends and {} receives of {}",
                self.ours.sends, self.ours.recvs, o.iters
            ));
        }
        if let Some(e) = &self.bridge_error {
            p.push(format!("bridge: {e}"));
        }
        if self.hw_counters.is_empty() {
            p.push("no rxe hw_counters in the VM log".into());
        }
        let lossless = o.drop == 0.0;
        let mut must_be_zero = vec![
            "rcvd_rnr_err",
            "send_rnr_err",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "send_err",
            "link_downed",
        ];
        if lossless {
            must_be_zero.extend(["rcvd_seq_err", "out_of_seq_request"]);
        }
        for c in must_be_zero {
            if self.hw(c) != 0 {
                p.push(format!("rxe hw_counter {c} = {}", self.hw(c)));
            }
        }
        if self
            .kmsgs
            .iter()
            .any(|l| l.to_ascii_lowercase().contains("icrc"))
        {
            p.push(format!("rxe logged ICRC messages: {:?}", self.kmsgs));
        }
        // the model's view of the VM's frames
        for r in [
            DropReason::BadIcrc,
            DropReason::Malformed,
            DropReason::Truncated,
        ] {
            if self.model.drop_count(r) != 0 {
                p.push(format!(
                    "model dropped {} frames as {r:?}",
                    self.model.drop_count(r)
                ));
            }
        }
        if lossless && self.model.drop_count(DropReason::OutOfSequence) != 0 {
            p.push("model saw out-of-sequence requests without drops".into());
        }
        for (n, v) in &self.unexpected_drops {
            p.push(format!("our endpoint counted {v} {n}"));
        }
        match &self.pcap {
            None => p.push("no pcap".into()),
            Some(c) => {
                if !c.decode_ok {
                    p.push(format!("pcap does not decode clean: {:?}", c.problems));
                }
                let rcvd = self.hw("rcvd_pkts");
                // RC: frames of ours the VM never answered (e.g. our re-ACKs of its retransmitted last SEND) may
                // reach rxe after the tool destroyed its QP; rxe drops those before counting. UC answers
                // nothing, but we send nothing but SENDs, and the tool's last receive completion needs every one
                // of their packets: all of them reached its QP.
                let tail = match o.conn {
                    Conn::Rc => c.roce_to_vm_unanswered_tail,
                    Conn::Uc | Conn::Ud => 0,
                };
                if !self.hw_counters.is_empty() {
                    if lossless && rcvd + tail < c.roce_to_vm {
                        p.push(format!(
                            "rxe counted {rcvd} good packets but we delivered {} (bad ICRC or header?)",
                            c.roce_to_vm
                        ));
                    }
                    if rcvd > c.roce_to_vm {
                        p.push(format!(
                            "rxe counted {rcvd} packets, more than the {} we delivered",
                            c.roce_to_vm
                        ));
                    }
                }
            }
        }
        if o.conn == Conn::Ud {
            p.extend(self.ud_problems());
        }
        p
    }

    /// What a clean UD run must show: every receive of ours checked and right, the GRH areas holding the
    /// IP headers of the VM's frames byte for byte (IPv4 or IPv6), and on the link only UD SENDs with Q_Key 0x11111111
    /// from each side's QP, PSNs one by one, none of ours with AckReq (the golden model never sets it on UD).
    fn ud_problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let o = &self.opts;
        match &self.ours.ud {
            None => p.push("our side checked no UD receive".into()),
            Some(u) => {
                if u.checked != u64::from(self.ours.recvs) || u.bad != 0 {
                    p.push(format!("UD receives: {u}"));
                }
                if let Some(w) = &self.ud_wire {
                    if let Some(e) = u.compare_with_capture(&w.from_vm.ip_headers) {
                        p.push(format!("UD GRH areas against the capture: {e}"));
                    }
                }
            }
        }
        let Some(w) = &self.ud_wire else {
            p.push("no UD scan of the capture".into());
            return p;
        };
        let (ours, theirs) = (self.ours.local.map(|d| d.qpn), self.ours.remote.map(|d| d.qpn));
        for (name, d, src) in [("ours", &w.to_vm, ours), ("the VM's", &w.from_vm, theirs)] {
            if d.non_ud() != 0 {
                p.push(format!("{name}: RoCE frames other than UD SEND_ONLY: {d}"));
            }
            if d.frames != 0 && (d.qkeys != BTreeSet::from([UD_QKEY]) || Some(d.src_qps.clone()) != src.map(|q| BTreeSet::from([q]))) {
                p.push(format!("{name}: DETH Q_Keys {:x?} / source QPs {:x?} (want 0x{UD_QKEY:x} / {src:x?})", d.qkeys, d.src_qps));
            }
            if d.psn_breaks != 0 {
                p.push(format!("{name}: UD PSNs not one by one: {d}"));
            }
            if d.payload_lens.iter().any(|&l| l != o.size as usize) {
                p.push(format!("{name}: payload lengths {:?}, not {}", d.payload_lens, o.size));
            }
        }
        if w.to_vm.ack_req != 0 {
            p.push(format!("{} of our UD packets have AckReq", w.to_vm.ack_req));
        }
        p
    }

    /// `Ok` when [`PingpongReport::problems`] is empty.
    pub fn check(&self) -> Result<()> {
        let p = self.problems();
        if p.is_empty() {
            Ok(())
        } else {
            bail!(
                "{} run failed:\n  {}\n{}",
                self.opts.tool(),
                p.join("\n  "),
                self.summary()
            )
        }
    }

    pub fn ok(&self) -> bool {
        self.problems().is_empty()
    }

    /// A human-readable summary (the tool's output, ours, counters).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let o = &self.opts;
        let _ = writeln!(
            s,
            "{}: our side {:?}, path MTU {} (VM netdev {}, rxe active {:?}), size {}, iters {}, drop {}",
            o.tool(),
            o.role,
            o.mtu,
            o.vm_netdev_mtu(),
            self.vm_active_mtu,
            o.size,
            o.iters,
            o.drop
        );
        let _ = writeln!(
            s,
            "--- VM {} (rc {:?}, timed out {}):",
            o.tool(),
            self.vm_rc,
            self.vm_timed_out
        );
        for l in self.tool_output.lines() {
            let _ = writeln!(s, "  {l}");
        }
        let _ = writeln!(s, "--- our side ({}):", self.endpoint);
        for l in &self.ours.lines {
            let _ = writeln!(s, "  {l}");
        }
        if let Some(e) = &self.ours.error {
            let _ = writeln!(s, "  error: {e}");
        }
        let hw: Vec<String> = self
            .hw_counters
            .iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "--- rxe hw_counters (nonzero): {}", hw.join(" "));
        for k in &self.kmsgs {
            let _ = writeln!(s, "  {k}");
        }
        let ctr: Vec<String> = self
            .endpoint_counters
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "--- our endpoint's counters (nonzero): {}", ctr.join(" "));
        let m = &self.model;
        let _ = writeln!(
            s,
            "--- model: rx {} tx {} requests {} retransmitted {} timeouts {} acks sent {} naks sent {:?} rnr naks sent {} duplicates {} drops {:?}",
            m.rx_frames,
            m.tx_frames,
            m.tx_request_packets,
            m.tx_retransmitted_packets,
            m.timeouts,
            m.acks_sent,
            m.naks_sent,
            m.rnr_naks_sent,
            m.duplicate_requests,
            m.drops
        );
        let b = &self.bridge;
        let _ = writeln!(
            s,
            "--- bridge: from VM {} ({} B), to VM {} ({} B), dropped from VM {}, dropped to VM {}",
            b.from_vm, b.bytes_from_vm, b.to_vm, b.bytes_to_vm, b.dropped_from_vm, b.dropped_to_vm
        );
        if let Some(p) = &self.pause {
            let _ = writeln!(s, "--- link pause: {p}");
        }
        if let Some(u) = &self.ours.ud {
            let _ = writeln!(s, "--- our UD receives: {u}");
        }
        if let Some(w) = &self.ud_wire {
            let _ = writeln!(s, "--- UD on the link, ours: {}", w.to_vm);
            let _ = writeln!(s, "--- UD on the link, the VM's: {}", w.from_vm);
        }
        if let Some(c) = &self.pcap {
            let _ = writeln!(
                s,
                "--- pcap {}: {} frames, {} RoCE ({} to VM, {} from VM), decode {}, retransmitted requests: to VM {}, from VM {}",
                c.path.display(),
                c.frames,
                c.roce_frames,
                c.roce_to_vm,
                c.roce_from_vm,
                if c.decode_ok { "OK" } else { "FAIL" },
                c.dup_requests_to_vm,
                c.dup_requests_from_vm
            );
            let ops: Vec<String> = c
                .opcode_counts
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(s, "  opcodes: {}", ops.join(", "));
            for p in &c.problems {
                let _ = writeln!(s, "  problem: {p}");
            }
        }
        let _ = write!(
            s,
            "--- wall {:.2} s, VM log {}",
            self.wall.as_secs_f64(),
            self.vm_log_path.display()
        );
        s
    }
}

/// The rc_pingpong / uc_pingpong / ud_pingpong peer on our endpoint.
struct Peer {
    dev: Dev,
    cq: Cq,
    qpn: u32,
    buf: u64,
    lkey: u32,
    size: u32,
    rx_depth: u32,
    conn: Conn,
    /// UD: the address handle, remote QPN and Q_Key of our SENDs (set by [`Peer::connect`]).
    ud: Option<UdDest>,
}

impl Peer {
    /// `pp_init_ctx` + `pp_post_recv(rx_depth)`. UD: the buffer is `size + 40` bytes (ud_pingpong's
    /// `memalign(page_size, size + 40)`, 0x7b throughout).
    fn new(dev: Dev, o: &PingpongOpts) -> Result<Peer> {
        let d = &dev;
        let pd = d.alloc_pd()?;
        let len = o.size + if o.conn == Conn::Ud { UD_GRH_ROOM } else { 0 };
        let buf = d.alloc(len as usize)?;
        d.write_mem(buf, &vec![0x7b; len as usize])?;
        let (lkey, _) = d.reg_mr(pd, buf, u64::from(len), AccessFlags::LOCAL_WRITE)?;
        let cq = d.create_cq(o.rx_depth + 1)?;
        let qpn = d.create_qp(
            pd,
            QpInitAttr {
                qp_type: o.conn.qp_type(),
                send_cq: cq,
                recv_cq: cq,
                cap: QpCap {
                    max_send_wr: 1,
                    max_recv_wr: o.rx_depth,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    ..QpCap::default()
                },
                sq_sig_all: false,
            },
        )?;
        // rc/uc_pingpong: access flags 0; ud_pingpong: P_Key index 0, the port and Q_Key 0x11111111
        let init = match o.conn {
            Conn::Rc | Conn::Uc => QpAttr { qp_access_flags: Some(AccessFlags::NONE), ..Default::default() },
            Conn::Ud => QpAttr { qkey: Some(UD_QKEY), ..Default::default() },
        };
        d.modify_qp(qpn, &QpAttr { qp_state: Some(QpState::Init), ..init }).context("modify_qp INIT")?;
        let p = Peer {
            dev,
            cq,
            qpn,
            buf,
            lkey,
            size: o.size,
            rx_depth: o.rx_depth,
            conn: o.conn,
            ud: None,
        };
        let n = p.post_recv(o.rx_depth);
        ensure!(n == o.rx_depth, "couldn't post receive ({n})");
        Ok(p)
    }

    fn post_recv(&self, n: u32) -> u32 {
        let d = &self.dev;
        for i in 0..n {
            // UD: the whole buffer, its first 40 bytes for the GRH (ud_pingpong's `ctx->size + 40`)
            let wr = RecvWr {
                wr_id: RECV_WRID,
                sg_list: vec![Sge {
                    addr: self.buf,
                    length: self.size + self.grh_room(),
                    lkey: self.lkey,
                }],
            };
            if d.post_recv(self.qpn, wr).is_err() {
                return i;
            }
        }
        n
    }

    /// The room in front of the payload: 40 bytes on UD, none otherwise.
    fn grh_room(&self) -> u32 {
        if self.conn == Conn::Ud {
            UD_GRH_ROOM
        } else {
            0
        }
    }

    fn post_send(&self) -> Result<()> {
        // UD: from `buf + 40`, to the address handle, the peer's QPN and Q_Key 0x11111111
        let mut wr = SendWr::new(
            SEND_WRID,
            WrOpcode::Send,
            vec![Sge {
                addr: self.buf + u64::from(self.grh_room()),
                length: self.size,
                lkey: self.lkey,
            }],
        );
        if self.conn == Conn::Ud {
            wr.ud = Some(self.ud.context("UD SEND before the address handle exists")?);
        }
        self.dev
            .post_send(self.qpn, wr)
            .map_err(|e| anyhow!("couldn't post send: {e:#}"))
    }

    /// `pp_connect_ctx`: RTR then RTS (UD: then the address handle). The peer's MAC is asked on the wire by
    /// the RNIC itself (ARP) when the endpoint can; `known_mac` otherwise (the lab's VM, against the golden
    /// model).
    fn connect(
        &mut self,
        o: &PingpongOpts,
        my_psn: u32,
        rem: &Dest,
        known_mac: testbench::wire::MacAddr,
        res: &mut OurResult,
    ) -> Result<()> {
        let d = &self.dev;
        let mac = match rem.ip() {
            IpAddr::V4(ip) => d.resolve(ip).context("resolving the peer's MAC")?.unwrap_or(known_mac),
            // our side answers neighbour solicitations but sends none: the MAC of an IPv6 peer must be known
            IpAddr::V6(ip) => {
                ensure!(
                    known_mac != testbench::wire::MacAddr::ZERO,
                    "the peer's GID {ip} is IPv6 and its MAC is not known (our side does not solicit neighbours)"
                );
                known_mac
            }
        };
        res.peer_mac = Some(mac);
        // hop_limit 1 in rc_pingpong's ah_attr is replaced by the route's (64) for RoCEv2 (guide 1a):
        // AddressVector::new's default.
        let av = AddressVector::new(mac, rem.ip());
        if self.conn == Conn::Ud {
            // ud_pingpong's pp_connect_ctx: RTR with the state alone, RTS with the SQ PSN alone, then the AH
            // from the peer's GID (its hop_limit 1 resolved to the route's, as above)
            d.modify_qp(self.qpn, &QpAttr { qp_state: Some(QpState::Rtr), ..Default::default() })
                .map_err(|e| anyhow!("Failed to modify QP to RTR: {e:#}"))?;
            d.modify_qp(self.qpn, &QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(my_psn), ..Default::default() })
                .map_err(|e| anyhow!("Failed to modify QP to RTS: {e:#}"))?;
            self.ud = Some(UdDest { av, remote_qpn: rem.qpn, remote_qkey: UD_QKEY });
            return Ok(());
        }
        let mut rtr = QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(o.mtu),
            dest_qp_num: Some(rem.qpn),
            rq_psn: Some(rem.psn),
            av: Some(av),
            ..Default::default()
        };
        let mut rts = QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: Some(my_psn),
            ..Default::default()
        };
        // uc_pingpong's pp_connect_ctx sets only the above: the responder resources, RNR timer, timeout and
        // retry counts are RC's
        if o.conn == Conn::Rc {
            rtr.max_dest_rd_atomic = Some(1);
            rtr.min_rnr_timer = Some(12);
            rts.timeout = Some(o.our_qp_timeout());
            rts.retry_cnt = Some(7);
            rts.rnr_retry = Some(7);
            rts.max_rd_atomic = Some(1);
        }
        d.modify_qp(self.qpn, &rtr).map_err(|e| anyhow!("failed to modify QP to RTR: {e:#}"))?;
        d.modify_qp(self.qpn, &rts).map_err(|e| anyhow!("failed to modify QP to RTS: {e:#}"))
    }

    /// rc_pingpong's main loop (`parse_single_wc`). UD: every receive is checked ([`UdRecvCheck`], from the
    /// peer `rem` at `peer_ip` to `our_ip`) before anything is sent again, so the buffer still holds it.
    #[allow(clippy::too_many_arguments)]
    fn run_loop(
        &self,
        client: bool,
        iters: u32,
        deadline: Instant,
        last_posted: &AtomicBool,
        rem: &Dest,
        our_ip: IpAddr,
        res: &mut OurResult,
    ) -> Result<()> {
        let peer_ip = Some(rem.ip());
        if self.conn == Conn::Ud {
            res.ud = Some(UdRecvCheck::default());
        }
        let mut pending = RECV_WRID;
        let mut posted = 0u32;
        let mut post_send = || -> Result<()> {
            self.post_send()?;
            posted += 1;
            if posted == iters {
                last_posted.store(true, Ordering::SeqCst);
            }
            Ok(())
        };
        if client {
            post_send()?;
            pending |= SEND_WRID;
        }
        let mut routs = self.rx_depth;
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let out = (|| -> Result<()> {
            while rcnt < iters || scnt < iters {
                let wcs = self.dev.poll_cq(self.cq, 2)?;
                if wcs.is_empty() {
                    if Instant::now() > deadline {
                        bail!("timed out after {scnt} sends and {rcnt} receives of {iters}");
                    }
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                }
                for wc in wcs {
                    if wc.status != WcStatus::Success {
                        bail!("failed status {:?} for wr_id {}", wc.status, wc.wr_id);
                    }
                    match wc.wr_id {
                        SEND_WRID => {
                            ensure!(
                                wc.opcode == WcOpcode::Send,
                                "send completion with opcode {:?}",
                                wc.opcode
                            );
                            scnt += 1;
                        }
                        RECV_WRID => {
                            ensure!(
                                wc.opcode == WcOpcode::Recv,
                                "recv completion with opcode {:?}",
                                wc.opcode
                            );
                            routs -= 1;
                            if routs <= 1 {
                                routs += self.post_recv(self.rx_depth - routs);
                                ensure!(routs >= self.rx_depth, "couldn't post receive ({routs})");
                            }
                            rcnt += 1;
                            res.bytes_received += u64::from(wc.byte_len);
                            if let (Some(u), Some(pip)) = (res.ud.as_mut(), peer_ip) {
                                let got = self.dev.read_mem(self.buf, (self.size + UD_GRH_ROOM) as usize)?;
                                u.check(&wc, &got[..UD_GRH_ROOM as usize], self.size, rem.qpn, pip, our_ip);
                                // the tool sends from its buffer of 0x7b bytes
                                if let Some(i) = got[UD_GRH_ROOM as usize..].iter().position(|&b| b != 0x7b) {
                                    bail!("UD receive #{rcnt}: payload byte {i} is 0x{:02x}, the tool sends 0x7b", got[UD_GRH_ROOM as usize + i]);
                                }
                            }
                        }
                        other => bail!("completion for unknown wr_id {other}"),
                    }
                    pending &= !wc.wr_id;
                    if scnt < iters && pending == 0 {
                        post_send()?;
                        pending = RECV_WRID | SEND_WRID;
                    }
                }
            }
            Ok(())
        })();
        res.sends = scnt;
        res.recvs = rcnt;
        out
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

fn fmt_gid(g: &[u8; 16]) -> String {
    Ipv6Addr::from(*g).to_string()
}

/// The addresses on the link.
#[derive(Clone, Copy)]
pub struct LinkAddrs {
    /// The peer's GID address, when known beforehand (the lab's VM): its GID must say so.
    pub vm_ip: Option<IpAddr>,
    /// The peer's MAC when the endpoint does not resolve it itself (the golden model in the lab, any IPv6 peer).
    pub vm_mac: testbench::wire::MacAddr,
    /// The address of our GID: our IPv4 address (the GID IPv4-mapped) or our IPv6 address.
    pub our_gid: IpAddr,
}

/// Our side of one run, in the calling thread: exchange (over `oob`; `listener`, made before the peer's
/// tool started, when we are the server), connect, iterate. The same for the lab's VM and a remote rxe host.
#[allow(clippy::too_many_arguments)]
pub fn our_side(
    o: &PingpongOpts,
    dev: Dev,
    listener: Option<Listening>,
    oob: &Oob,
    link: LinkAddrs,
    deadline: Instant,
    last_posted: &AtomicBool,
    res: &mut OurResult,
) -> Result<()> {
    let LinkAddrs {
        vm_ip,
        vm_mac,
        our_gid,
    } = link;
    let mut peer = Peer::new(dev, o)?;
    let mut rng = SmallRng::seed_from_u64(o.seed ^ 0x7070_6e67);
    let my = Dest {
        lid: 0,
        qpn: peer.qpn,
        psn: rng.gen::<u32>() & 0xFF_FFFF,
        gid: match our_gid {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        },
    };
    res.local = Some(my);
    res.lines.push(format!(
        "local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        my.lid,
        my.qpn,
        my.psn,
        fmt_gid(&my.gid)
    ));
    let t = || remaining(deadline);
    let rem = match o.role {
        Role::Server => {
            // pp_server_exch_dest
            let conn = listener
                .expect("listener")
                .accept(t())
                .with_context(|| format!("waiting for the peer's {} to connect", o.tool()))?;
            let msg = conn.recv_exact(RECORD_LEN, t()).context("server read")?;
            let rem = Dest::from_wire(&msg)?;
            res.remote = Some(rem);
            peer.connect(o, my.psn, &rem, vm_mac, res)?;
            conn.send_all(&my.to_wire(), t()).context("server write")?;
            let done = conn.recv_exact(5, t()).context("reading \"done\"")?;
            ensure!(done == b"done\0", "expected \"done\\0\", got {done:?}");
            conn.close();
            rem
        }
        Role::Client => {
            // pp_client_exch_dest
            let conn = oob
                .connect(o.port, t())
                .with_context(|| format!("connecting to the peer's {} server", o.tool()))?;
            conn.send_all(&my.to_wire(), t()).context("client write")?;
            let msg = conn.recv_exact(RECORD_LEN, t()).context("client read")?;
            conn.send_all(b"done\0", t()).context("client write done")?;
            conn.close();
            let rem = Dest::from_wire(&msg)?;
            res.remote = Some(rem);
            rem
        }
    };
    res.lines.push(format!(
        "remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        rem.lid,
        rem.qpn,
        rem.psn,
        fmt_gid(&rem.gid)
    ));
    if let Some(vm_ip) = vm_ip {
        ensure!(
            rem.ip() == vm_ip,
            "the peer's GID {} is not its address {vm_ip} (is -g that address's GID?)",
            fmt_gid(&rem.gid)
        );
    }
    if o.role == Role::Client {
        peer.connect(o, my.psn, &rem, vm_mac, res)?;
    }
    let start = Instant::now();
    let r = peer.run_loop(o.role == Role::Client, o.iters, deadline, last_posted, &rem, our_gid, res);
    res.elapsed = start.elapsed();
    r?;
    let bytes = u64::from(o.size) * u64::from(o.iters) * 2;
    res.bytes = bytes;
    let usec = res.elapsed.as_secs_f64() * 1e6;
    res.lines.push(format!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    ));
    res.lines.push(format!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        o.iters,
        usec / 1e6,
        usec / f64::from(o.iters.max(1))
    ));
    Ok(())
}

/// Parse the VM log: tool output, exit status, hw_counters, kernel messages, active MTU.
fn parse_vm_log(log: &str) -> (String, BTreeMap<String, u64>, Vec<String>, Option<u32>) {
    let mut tool = String::new();
    let mut inside = false;
    let mut hw = BTreeMap::new();
    let mut kmsgs = Vec::new();
    let mut active = None;
    for l in log.lines() {
        if l.contains("=== PINGPONG_BEGIN") {
            inside = true;
            continue;
        }
        if l.contains("=== PINGPONG_END") {
            inside = false;
            continue;
        }
        if let Some(rest) = l.strip_prefix("hw_counter ") {
            let mut it = rest.split_whitespace();
            if let (Some(k), Some(v)) = (it.next(), it.next()) {
                if let Ok(v) = v.parse() {
                    hw.insert(k.to_string(), v);
                }
            }
            continue;
        }
        if let Some(rest) = l.strip_prefix("kmsg ") {
            kmsgs.push(rest.to_string());
            continue;
        }
        if let Some(rest) = l.strip_prefix("active_mtu ") {
            active = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            continue;
        }
        if inside {
            tool.push_str(l);
            tool.push('\n');
        }
    }
    (tool, hw, kmsgs, active)
}

/// Read the pcap: golden decode plus our own counts (RoCE frames per direction, repeated request PSNs).
pub fn check_pcap(path: &std::path::Path, our_ip: IpAddr) -> Result<PcapCheck> {
    let rep = testbench::decode::decode_pcap(path)
        .map_err(|e| anyhow!("decoding {}: {e}", path.display()))?;
    let mut c = PcapCheck {
        path: path.to_path_buf(),
        frames: rep.frames,
        roce_frames: rep.roce_frames,
        decode_ok: rep.ok(),
        problems: rep
            .problems
            .iter()
            .map(|p| format!("frame {}: {}: {}", p.frame, p.problem, p.detail))
            .collect(),
        opcode_counts: rep.opcode_counts.clone(),
        ..Default::default()
    };
    let f = std::fs::File::open(path)?;
    let mut r = pcap_file::pcap::PcapReader::new(f)?;
    let mut seen: HashMap<(IpAddr, u32, u32), u32> = HashMap::new();
    let mut order = Vec::new();
    while let Some(pkt) = r.next_packet() {
        let pkt = pkt?;
        let Ok(Frame::Roce(rf)) = parse_ethernet(&pkt.data) else {
            continue;
        };
        let ours = rf.ip.src() == our_ip;
        let is_request = rf.packet.opcode().is_some_and(|op| op.info().is_request());
        order.push(Seen {
            ours,
            is_request,
            psn: rf.packet.bth.psn,
        });
        if ours {
            c.roce_to_vm += 1;
        } else {
            c.roce_from_vm += 1;
        }
        if is_request {
            let b = &rf.packet.bth;
            let n = seen.entry((rf.ip.src(), b.dest_qpn, b.psn)).or_insert(0);
            *n += 1;
            if *n > 1 {
                if ours {
                    c.dup_requests_to_vm += 1;
                } else {
                    c.dup_requests_from_vm += 1;
                }
            }
        }
    }
    c.roce_to_vm_unanswered_tail = unanswered_tail(&order);
    Ok(c)
}

/// One RoCE frame of the capture, as [`unanswered_tail`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// Sent by us (to the VM).
    pub ours: bool,
    pub is_request: bool,
    pub psn: u32,
}

/// How many of our frames come after the last one the VM provably processed. A response from the VM with PSN
/// p proves that the VM processed our request p (its latest copy before the response) and, the link being in
/// order, every frame of ours before it. Our frames after that point, including those the capture shows before
/// the VM's last frame (they may still sit in the VM's receive queue when the tool exits), may never be seen
/// by rxe's QP.
pub fn unanswered_tail(frames: &[Seen]) -> u64 {
    let mut last_req_at: HashMap<u32, usize> = HashMap::new();
    let mut proven: Option<usize> = None;
    for (i, f) in frames.iter().enumerate() {
        if f.ours {
            if f.is_request {
                last_req_at.insert(f.psn, i);
            }
        } else if !f.is_request {
            if let Some(&at) = last_req_at.get(&f.psn) {
                proven = proven.max(Some(at));
            }
        }
    }
    let from = proven.map_or(0, |p| p + 1);
    frames[from..].iter().filter(|f| f.ours).count() as u64
}

/// Boot the VM running `ibv_rc_pingpong` (or `ibv_uc_pingpong`, [`PingpongOpts::conn`]) in the role opposite to
/// `o.role`, play our role on our endpoint, and report. Errors only when the run could not be set up (no VM image, socket); a failed run is an `Ok`
/// report whose [`PingpongReport::check`] fails.
impl PingpongOpts {
    /// Our QP's retransmit timeout: rc_pingpong's 14 against the model; against the RTL, the rule perftest
    /// runs use ([`super::rtl_ep::rtl_qp_timeout`]) for one message outstanding (rc_pingpong sends one at a
    /// time).
    pub fn our_qp_timeout(&self) -> u8 {
        match self.endpoint {
            EndpointKind::Model | EndpointKind::Card => 14,
            EndpointKind::Rtl | EndpointKind::BoardSim | EndpointKind::Board => super::rtl_ep::rtl_qp_timeout(
                super::rtl_ep::wire_bytes(u64::from(self.size), self.mtu),
                super::rtl_ep::INBOUND_GBPS,
            ),
        }
    }
}

pub fn run_pingpong(o: &PingpongOpts) -> Result<PingpongReport> {
    o.check()?;
    let t0 = Instant::now();
    let deadline = t0 + o.timeout;
    let image = match &o.image {
        Some(i) => i.clone(),
        None => super::build_vm()?,
    };
    let dir = super::run_dir(&o.run_name);
    std::fs::create_dir_all(&dir)?;
    let pcap = o.pcap.clone().unwrap_or_else(|| dir.join("link.pcap"));
    let vm_mtu = o.vm_netdev_mtu();

    let mut cfg = VmConfig::new("vm", image, super::temp_socket_path("pingpong"), &dir);
    cfg.mtu = vm_mtu;
    cfg.timeout = o.timeout;
    cfg.vlan = o.vlan;
    let host_cfg = HostConfig {
        mtu: vm_mtu as usize,
        ip6: o.ipv6.then_some(LAB_OUR_IP6),
        ..HostConfig::default()
    };
    let (vm_ip, vm_mac, our_ip) = (cfg.ip, cfg.mac, host_cfg.ip);
    let (vm_gid, our_gid) = if o.ipv6 {
        (IpAddr::V6(LAB_VM_IP6), IpAddr::V6(LAB_OUR_IP6))
    } else {
        (IpAddr::V4(vm_ip), IpAddr::V4(our_ip))
    };
    // the tool gets the time left after a generous boot allowance, so the counters still get printed
    let tool_timeout = o
        .timeout
        .saturating_sub(Duration::from_secs(12))
        .as_secs()
        .max(5);

    // the RTL's own MAC pcaps (rnic-tx.pcap, rnic-rx.pcap, in simulated time) beside the link's
    let (dev, ep) = open_endpoint_with(
        o.endpoint,
        DeviceConfig {
            mac: host_cfg.mac,
            ip: IpAddr::V4(our_ip),
            seed: o.seed,
            // UD: a QPN other than the VM's (rxe numbers its first QP 0x11), so that a swapped source and
            // destination QPN shows in the DETH checks
            first_qpn: if o.conn == Conn::Ud { 0x31 } else { 0x11 },
            active_mtu: o.mtu.max(256),
            vlan: o.vlan.map(|tci| testbench::wire::VlanTag { tci }),
        },
        host_cfg.ip6,
        super::rtl_ep::INBOUND_GBPS,
        o.endpoint.is_rtl().then(|| dir.clone()),
    )?;
    let host = HostStack::new(host_cfg).with_roce(ep);
    // The exchange: on the link (the lab's TCP stack), or over the VM's second NIC as over a real host's
    // ordinary network (the card's code path: the VM's tool reaches us at 10.0.2.2)
    // (on a VLAN the VM's one address is on eth0.VID, so the exchange takes the second NIC too)
    let (oob, peer_ip) = if o.endpoint.oob_over_net() || o.vlan.is_some() {
        let fwd = super::oob::free_port()?;
        cfg.mgmt_net = Some((fwd, o.port));
        let loopback = |p| std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, p));
        (Oob::Net { connect: loopback(fwd), listen: loopback(0) }, super::vm::MGMT_HOST_IP)
    } else {
        (Oob::Lab { mgmt: host.mgmt(), peer: vm_ip }, our_ip)
    };
    let listener = match o.role {
        Role::Server => Some(oob.listen(o.port)?),
        Role::Client => None,
    };
    let port = listener.as_ref().and_then(|l| l.port()).unwrap_or(o.port);
    let (mode, peer) = match o.role {
        Role::Server => ("client", peer_ip.to_string()),
        Role::Client => ("server", String::new()),
    };
    cfg.script = Some(format!(
        "PP_TOOL={}\nPP_MODE={mode}\nPP_PEER={peer}\nPP_PORT={port}\nPP_MTU={}\nPP_SIZE={}\nPP_ITERS={}\nPP_RXDEPTH={}\nPP_TIMEOUT={tool_timeout}\nPP_PINGS={}\nPP_OUR_IP={our_ip}\n{}{GID_SCRIPT}\n{VM_SCRIPT}",
        o.tool(), o.mtu, o.size, o.iters, o.rx_depth, o.pings,
        if o.ipv6 { ipv6_prelude(LAB_VM_IP6) } else { String::new() }
    ));
    // ibv_rc_pingpong destroys its QP once its own last completion is in: the exchange after our last post
    // runs loss-free (`BridgeConfig::drops_end`)
    let last_posted = Arc::new(AtomicBool::new(false));
    let bcfg = BridgeConfig {
        pcap: Some(pcap.clone()),
        drop_from_vm: o.drop,
        drop_to_vm: o.drop,
        seed: o.seed,
        drops_end: Some(last_posted.clone()),
        ..Default::default()
    };
    let session = Session::start_paced(&cfg, bcfg, host, dev.inbound_backlog())?;

    let mut ours = OurResult::default();
    if let Err(e) = our_side(
        o,
        dev.clone(),
        listener,
        &oob,
        LinkAddrs {
            vm_ip: Some(vm_gid),
            vm_mac,
            our_gid,
        },
        deadline,
        &last_posted,
        &mut ours,
    ) {
        ours.error = Some(format!("{e:#}"));
    }
    let (out, report) = session.finish()?;
    let (tool_output, hw_counters, kmsgs, vm_active_mtu) = parse_vm_log(&out.log);
    let ping = out.log.lines().find_map(|l| l.strip_prefix("ping ").filter(|r| r.contains("packets transmitted")).map(str::to_string));
    let model = dev.model_counters().unwrap_or_default();
    let endpoint_counters = dev.counters();
    let unexpected_drops = dev.unexpected_drops();
    let endpoint = dev.describe();
    drop(dev);
    let pcap_check = check_pcap(&pcap, our_gid).ok();
    let ud_wire = if o.conn == Conn::Ud { super::ud::scan_pcap(&pcap, our_gid).ok() } else { None };
    Ok(PingpongReport {
        opts: o.clone(),
        vm_rc: out.script_rc,
        vm_timed_out: out.timed_out,
        tool_output,
        vm_log_path: out.log_path.clone(),
        ours,
        hw_counters,
        kmsgs,
        vm_active_mtu,
        ping,
        bridge: report.stats,
        pause: out.pause.clone(),
        bridge_error: report.error.map(|e| format!("{e:#}")),
        model,
        endpoint,
        endpoint_counters,
        unexpected_drops,
        pcap: pcap_check,
        ud_wire,
        wall: t0.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_req(psn: u32) -> Seen {
        Seen { ours: false, is_request: true, psn }
    }
    fn vm_ack(psn: u32) -> Seen {
        Seen { ours: false, is_request: false, psn }
    }
    fn our_req(psn: u32) -> Seen {
        Seen { ours: true, is_request: true, psn }
    }
    fn our_ack(psn: u32) -> Seen {
        Seen { ours: true, is_request: false, psn }
    }

    #[test]
    fn unanswered_tail_counts_our_frames_behind_the_last_one_the_vm_answered() {
        // the end seen in CI: the VM retransmits its last SEND (100..=103); we ACK the first copy, send our
        // SEND (500..=503), re-ACK three duplicate packets; the VM ACKs our SEND and exits
        let mut f = vec![vm_req(100), vm_req(101), vm_req(102)];
        f.push(our_ack(99));
        f.push(vm_req(103));
        f.extend([500, 501, 502, 503].map(our_req));
        f.extend([103, 103, 103].map(our_ack));
        f.push(vm_ack(503));
        assert_eq!(unanswered_tail(&f), 3, "the three re-ACKs after our SEND LAST");
        // our frames after the VM's last one count too
        f.push(our_ack(103));
        assert_eq!(unanswered_tail(&f), 4);
        // a frame of ours the VM answered is not in the tail, however late: a later ACK covers our re-sent 503
        f.push(our_req(503));
        f.push(vm_ack(503));
        assert_eq!(unanswered_tail(&f), 0);
        // nothing answered: every frame of ours may be unseen
        assert_eq!(unanswered_tail(&[our_req(1), vm_req(7), our_ack(7)]), 2);
        assert_eq!(unanswered_tail(&[]), 0);
    }

    /// ibv_ud_pingpong: at rxe's active MTU (the tool has no -m), messages of at most that MTU, no drops; the
    /// rest refused before a VM starts; every endpoint may play our side.
    #[test]
    fn ud_refusals() {
        let mut o = PingpongOpts { conn: Conn::Ud, size: 1002, iters: 200, ..Default::default() };
        assert_eq!(o.tool(), "ibv_ud_pingpong");
        assert_eq!(tool_conn("ibv_ud_pingpong"), Some(Conn::Ud));
        assert!(o.check().is_ok());
        o.mtu = 4096;
        assert_eq!((o.vm_netdev_mtu(), o.vm_active_mtu()), (9000, 4096));
        assert!(o.check().is_ok());
        for m in [256, 512, 2048] {
            o.mtu = m;
            assert!(o.check().unwrap_err().to_string().contains("has no -m"), "{m}");
        }
        o.mtu = 1024;
        o.size = 1025;
        assert!(o.check().unwrap_err().to_string().contains("above the port MTU 1024"));
        o.size = 1024;
        assert!(o.check().is_ok());
        o.drop = 0.01;
        assert!(o.check().unwrap_err().to_string().contains("--drop needs RC"));
        o.drop = 0.0;
        o.endpoint = EndpointKind::Rtl;
        assert!(o.check().is_ok(), "the RTL speaks UD");
    }

    #[test]
    fn record_round_trip() {
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            gid: Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped().octets(),
        };
        let w = d.to_wire();
        assert_eq!(
            &w[..51],
            b"0000:000011:abcdef:00000000000000000000ffff0a000002"
        );
        assert_eq!(w[51], 0);
        assert_eq!(Dest::from_wire(&w).unwrap(), d);
        assert_eq!(d.ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    }

    #[test]
    fn parses_vm_log() {
        let log = "x\n=== PINGPONG_BEGIN mode=client ===\nactive_mtu 1024\n  local address: ...\n100 iters in 1.00 seconds = 10000.00 usec/iter\n=== PINGPONG_END rc=0 ===\nhw_counter rcvd_pkts 812\nhw_counter rcvd_seq_err 0\nkmsg [ 1.0] rdma_rxe: loaded\n";
        let (tool, hw, k, mtu) = parse_vm_log(log);
        assert!(tool.contains("100 iters in"));
        assert!(!tool.contains("active_mtu"));
        assert_eq!(hw.get("rcvd_pkts"), Some(&812));
        assert_eq!(hw.len(), 2);
        assert_eq!(k.len(), 1);
        assert_eq!(mtu, Some(1024));
    }
}
