//! The CM agent on QP1: host software over the verbs of any endpoint ([`Dev`]: the RTL, the simulated board,
//! the card), as Linux's ib_cm is for a real HCA. It owns the GSI QP (QP1, a UD QP with the GSI Q_Key),
//! keeps receives posted with room for the 40-byte GRH area and a 256-byte MAD, and answers what arrives.
//!
//! This agent has no listener yet, and answers as Linux's ib_cm answers on a port nobody listens on
//! (`docs/cm.md`):
//!
//! * a REQ: REJ with reason 8 (invalid service ID), message rejected REQ, remote communication ID = the REQ's
//!   local one, the REQ's transaction ID (a retransmitted REQ gets the same REJ);
//! * a SIDR_REQ: SIDR_REP with status 1 (service ID not supported), the request ID, service ID and
//!   transaction ID echoed;
//! * a DREQ: DREP (Linux answers a DREQ for a communication ID it does not know);
//! * anything else (another class or class version, a method other than Send, an attribute that is no CM
//!   message, a MAD cut short, an answer to nothing of ours): dropped and counted.
//!
//! Every answer goes to the sender's QP1 with the GSI Q_Key, addressed from the received datagram's IPv4
//! header (the GRH area), the MAC resolved by the endpoint's ARP.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use anyhow::{bail, Context, Result};
use testbench::model::{
    AccessFlags, AddressVector, Cq, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode,
    WcStatus, WrOpcode,
};
use testbench::wire::mad::{
    CmDrep, CmMsg, CmRej, CmSidrRep, Mad, GSI_QKEY, MAD_BASE_VERSION, MAD_LEN, MAD_METHOD_SEND, CM_CLASS_VERSION, MGMT_CLASS_CM,
};
use testbench::wire::MacAddr;

use super::verbs::{Dev, UD_GRH_ROOM};

/// Receives kept posted on QP1, and send slots (a MAD each) used round robin.
const RECVS: u32 = 16;
const SENDS: u32 = 16;
const SLOT: u64 = 512;

/// REJ reason: invalid service ID (no listener).
pub const REJ_INVALID_SERVICE_ID: u16 = 8;
/// SIDR_REP status: service ID not supported.
pub const SIDR_UNSUPPORTED: u8 = 1;

/// What the agent did, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmStats {
    pub received: u64,
    pub rejected: u64,
    pub sidr_unsupported: u64,
    pub dreps: u64,
    /// MADs dropped, by why.
    pub dropped: BTreeMap<&'static str, u64>,
}

/// The agent: QP1 on `dev`, its buffers, what it answered.
pub struct CmAgent {
    dev: Dev,
    cq: Cq,
    lkey: u32,
    base: u64,
    next_send: u32,
    /// Resolved MACs of the peers that sent us MADs.
    macs: BTreeMap<Ipv4Addr, MacAddr>,
    pub stats: CmStats,
}

impl CmAgent {
    /// Create QP1 on `dev`, bring it to RTS and post its receives.
    pub fn open(dev: Dev) -> Result<Self> {
        let base = dev.alloc(((RECVS + SENDS) as u64 * SLOT) as usize)?;
        let pd = dev.alloc_pd()?;
        let (lkey, _) = dev.reg_mr(pd, base, (RECVS + SENDS) as u64 * SLOT, AccessFlags::LOCAL_WRITE)?;
        let cq = dev.create_cq(2 * (RECVS + SENDS))?;
        let cap = QpCap { max_send_wr: SENDS, max_recv_wr: RECVS, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qpn = dev.create_gsi_qp(pd, QpInitAttr { qp_type: QpType::Ud, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
        if qpn != 1 {
            bail!("the GSI QP is QP{qpn}, not QP1");
        }
        dev.modify_qp(1, &QpAttr { qp_state: Some(QpState::Init), qkey: Some(GSI_QKEY), ..Default::default() })?;
        dev.modify_qp(1, &QpAttr { qp_state: Some(QpState::Rtr), ..Default::default() })?;
        dev.modify_qp(1, &QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(0), ..Default::default() })?;
        let a = CmAgent { dev, cq, lkey, base, next_send: 0, macs: BTreeMap::new(), stats: CmStats::default() };
        for i in 0..RECVS {
            a.post_recv(i)?;
        }
        Ok(a)
    }

    fn post_recv(&self, i: u32) -> Result<()> {
        let sge = Sge { addr: self.base + u64::from(i) * SLOT, length: UD_GRH_ROOM + MAD_LEN as u32, lkey: self.lkey };
        self.dev.post_recv(1, RecvWr { wr_id: u64::from(i), sg_list: vec![sge] })
    }

    fn drop(&mut self, why: &'static str) {
        *self.stats.dropped.entry(why).or_insert(0) += 1;
    }

    /// Take every completion on QP1's CQ and answer each MAD received. Returns how many MADs came.
    pub fn poll(&mut self) -> Result<usize> {
        let mut n = 0;
        for wc in self.dev.poll_cq(self.cq, 32)? {
            if wc.opcode != WcOpcode::Recv {
                if wc.status != WcStatus::Success {
                    bail!("a MAD of ours completed {:?}", wc.status);
                }
                continue;
            }
            let slot = wc.wr_id as u32;
            if wc.status == WcStatus::Success {
                n += 1;
                self.stats.received += 1;
                let b = self.dev.read_mem(self.base + u64::from(slot) * SLOT, (UD_GRH_ROOM as usize + MAD_LEN).min(wc.byte_len as usize))?;
                self.take(&b)?;
            } else {
                self.drop("receive error");
            }
            self.post_recv(slot)?;
        }
        Ok(n)
    }

    /// One datagram as QP1 received it: the GRH area, then the MAD.
    fn take(&mut self, b: &[u8]) -> Result<()> {
        let g = UD_GRH_ROOM as usize;
        if b.len() < g + MAD_LEN || b[20] >> 4 != 4 {
            self.drop(if b.len() < g + MAD_LEN { "short" } else { "not IPv4" });
            return Ok(());
        }
        let src = Ipv4Addr::new(b[32], b[33], b[34], b[35]);
        let mad = match Mad::parse(&b[g..]) {
            Ok(m) => m,
            Err(_) => {
                self.drop("unreadable");
                return Ok(());
            }
        };
        let h = mad.hdr;
        if (h.base_version, h.mgmt_class, h.class_version) != (MAD_BASE_VERSION, MGMT_CLASS_CM, CM_CLASS_VERSION) {
            self.drop("not CM class version 2");
            return Ok(());
        }
        if h.method != MAD_METHOD_SEND {
            self.drop("method not Send");
            return Ok(());
        }
        let answer = match mad.cm {
            Some(CmMsg::Req(req)) => {
                self.stats.rejected += 1;
                CmMsg::Rej(CmRej {
                    remote_comm_id: req.local_comm_id,
                    message_rejected: 0,
                    reason: REJ_INVALID_SERVICE_ID,
                    ..Default::default()
                })
            }
            Some(CmMsg::SidrReq(r)) => {
                self.stats.sidr_unsupported += 1;
                CmMsg::SidrRep(CmSidrRep {
                    request_id: r.request_id,
                    status: SIDR_UNSUPPORTED,
                    service_id: r.service_id,
                    ..Default::default()
                })
            }
            Some(CmMsg::Dreq(d)) => {
                self.stats.dreps += 1;
                CmMsg::Drep(CmDrep { local_comm_id: d.remote_comm_id, remote_comm_id: d.local_comm_id, ..Default::default() })
            }
            Some(_) => {
                self.drop("nothing of ours to answer");
                return Ok(());
            }
            None => {
                self.drop("no CM attribute");
                return Ok(());
            }
        };
        self.send(src, &answer.mad(h.tid))
    }

    /// Send one MAD to `ip`'s QP1.
    fn send(&mut self, ip: Ipv4Addr, mad: &[u8; MAD_LEN]) -> Result<()> {
        let mac = match self.macs.get(&ip) {
            Some(m) => *m,
            None => {
                let m = self.dev.resolve(ip)?.with_context(|| format!("no MAC for {ip}"))?;
                self.macs.insert(ip, m);
                m
            }
        };
        let slot = RECVS + self.next_send % SENDS;
        self.next_send += 1;
        let addr = self.base + u64::from(slot) * SLOT;
        self.dev.write_mem(addr, mad)?;
        let mut wr = SendWr::new(u64::from(slot), WrOpcode::Send, vec![Sge { addr, length: MAD_LEN as u32, lkey: self.lkey }]);
        wr.ud = Some(UdDest { av: AddressVector::new(mac, IpAddr::V4(ip)), remote_qpn: 1, remote_qkey: GSI_QKEY });
        self.dev.post_send(1, wr)
    }
}

/// What a lab run of the librdmacm clients against the agent shows: each client's exit status and output,
/// the agent's counts, and every CM MAD on the link (from the VM or not, parsed).
#[derive(Debug)]
pub struct CmProbe {
    pub clients: Vec<(String, Option<i32>, String)>,
    pub stats: CmStats,
    pub mads: Vec<(bool, Mad)>,
    pub vm_log: String,
    pub error: Option<String>,
}

/// The clients run in the VM against our address (10.0.0.2), each with its port space's port 7174.
const PROBE_CLIENTS: &[(&str, &str)] = &[("rping", "rping -c -a 10.0.0.2 -p 7174 -C 1 -S 64"), ("udaddy", "udaddy -s 10.0.0.2")];

/// Boot the lab VM against the RTL endpoint with the CM agent on QP1 and run the librdmacm clients in it:
/// rping's REQ must come back rejected (REJ 8) and udaddy's SIDR_REQ unanswerable (SIDR_REP status 1).
pub fn probe_no_listener(image: &super::VmImage, run_name: &str) -> Result<CmProbe> {
    use super::verbs::{open_endpoint_with, EndpointKind};
    use super::{BridgeConfig, HostConfig, HostStack, Session, VmConfig};
    let dir = super::run_dir(run_name);
    std::fs::create_dir_all(&dir)?;
    let pcap = dir.join("link.pcap");
    let mut cfg = VmConfig::new("vm", image.clone(), super::temp_socket_path("cm"), &dir);
    cfg.timeout = std::time::Duration::from_secs(90);
    let mut script = String::new();
    for (name, cmd) in PROBE_CLIENTS {
        script.push_str(&format!(
            "echo '=== CM_CLIENT_BEGIN {name} ==='\ntimeout 30 {cmd}; echo \"=== CM_CLIENT {name} rc=$? ===\"\n"
        ));
    }
    cfg.script = Some(script);
    let host_cfg = HostConfig::default();
    let our_ip = host_cfg.ip;
    let (dev, ep) = open_endpoint_with(
        EndpointKind::Rtl,
        testbench::model::DeviceConfig {
            mac: host_cfg.mac,
            ip: IpAddr::V4(our_ip),
            seed: 1,
            first_qpn: 0x11,
            active_mtu: 1024,
            vlan: None,
        },
        None,
        super::rtl_ep::INBOUND_GBPS,
        Some(dir.clone()),
    )?;
    let host = HostStack::new(host_cfg).with_roce(ep);
    let bcfg = BridgeConfig { pcap: Some(pcap.clone()), ..Default::default() };
    let mut session = Session::start_paced(&cfg, bcfg, host, dev.inbound_backlog())?;
    let mut agent = None;
    let mut error = None;
    match CmAgent::open(dev.clone()) {
        Ok(a) => agent = Some(a),
        Err(e) => error = Some(format!("{e:#}")),
    }
    if let Some(a) = agent.as_mut() {
        // answer until the VM's script ends
        while !session.vm.wait_for_log("SCRIPT_EXIT", std::time::Duration::from_millis(5)) {
            if let Err(e) = a.poll() {
                error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    let (out, _report) = session.finish()?;
    let clients = PROBE_CLIENTS
        .iter()
        .map(|(name, _)| {
            let begin = format!("=== CM_CLIENT_BEGIN {name} ===");
            let tag = format!("=== CM_CLIENT {name} rc=");
            let text: String = out.log.split(&begin).nth(1).map_or(String::new(), |t| t.split(&tag).next().unwrap_or("").to_string());
            let rc = out.log.lines().find_map(|l| l.split(&tag).nth(1)?.split(' ').next()?.parse().ok());
            (name.to_string(), rc, text)
        })
        .collect();
    let mut mads = Vec::new();
    let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap)?)?;
    while let Some(p) = rd.next_packet() {
        if let Ok(testbench::wire::Frame::Roce(f)) = testbench::wire::parse_ethernet(&p?.data) {
            if f.packet.bth.dest_qpn == 1 {
                if let Ok(m) = Mad::parse(&f.packet.payload) {
                    mads.push((f.ip.src() != IpAddr::V4(our_ip), m));
                }
            }
        }
    }
    Ok(CmProbe { clients, stats: agent.map(|a| a.stats).unwrap_or_default(), mads, vm_log: out.log, error })
}
