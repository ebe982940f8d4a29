//! The CM agent in the lab: [`rnic_driver::cm`] (the protocol and the agent, host software over any device's
//! verbs) on the simulator's endpoints ([`Dev`]), and the lab runs of the librdmacm tools against it
//! ([`probe`], [`probe_client`], [`probe_cmatose_client`], [`probe_udaddy_client`]).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use testbench::wire::mad::{CmSidrRep, Mad};
use testbench::wire::MacAddr;

pub use rnic_driver::cm::*;

use super::verbs::Dev;

/// The agent on one of the lab's endpoints.
pub type CmAgent = rnic_driver::cm::CmAgent<Dev>;


/// What a lab run of the librdmacm clients against the agent shows: each client's exit status and output,
/// the agent's counts, the events it raised, what our rping server read in each ping, and every CM MAD on the
/// link (from the VM or not, parsed).
#[derive(Debug)]
pub struct CmProbe {
    pub clients: Vec<(String, Option<i32>, String)>,
    pub stats: CmStats,
    pub events: Vec<CmEvent>,
    pub pings: Vec<Vec<u8>>,
    /// Each ucmatose connection served: replies received, and whether we disconnected it.
    pub cmatose: Vec<(u32, bool)>,
    /// The udaddy service: messages received, replies sent, receives not as udaddy sends them.
    pub udaddy: Option<(u32, u32, u32)>,
    pub mads: Vec<(bool, Mad)>,
    /// MADs the link dropped: from the VM, to it.
    pub dropped: (u64, u64),
    pub error: Option<String>,
}

/// A lab run against the RTL endpoint: the VM booted with `script`, every frame of the link in `pcap`, the
/// lab's TCP on the link (`mgmt`) for an exchange with the VM.
pub(super) struct CmLab {
    pub(super) dev: Dev,
    pub(super) session: super::Session<super::HostStack<super::verbs::BoxedEndpoint>>,
    pub(super) pcap: std::path::PathBuf,
    pub(super) ip: Ipv4Addr,
    pub(super) mac: MacAddr,
    pub(super) mgmt: super::Mgmt,
}

impl CmLab {
    /// `loss`: the fraction of the MADs (frames to QP1) the link drops each way, seeded by `seed`.
    pub(super) fn start(image: &super::VmImage, run_name: &str, script: String, loss: f64, seed: u64) -> Result<Self> {
        use super::verbs::{open_endpoint_with, EndpointKind};
        use super::{BridgeConfig, HostConfig, HostStack, Session, VmConfig};
        let dir = super::run_dir(run_name);
        std::fs::create_dir_all(&dir)?;
        let pcap = dir.join("link.pcap");
        let mut cfg = VmConfig::new("vm", image.clone(), super::temp_socket_path("cm"), &dir);
        cfg.timeout = Duration::from_secs(90);
        cfg.script = Some(script);
        let host_cfg = HostConfig::default();
        let (ip, mac) = (host_cfg.ip, host_cfg.mac);
        let model = testbench::model::DeviceConfig { mac, ip: IpAddr::V4(ip), seed: 1, first_qpn: 0x11, active_mtu: 1024, vlan: None };
        let (dev, ep) = open_endpoint_with(EndpointKind::Rtl, model, None, super::rtl_ep::INBOUND_GBPS, Some(dir.clone()))?;
        let host = HostStack::new(host_cfg).with_roce(ep);
        let mgmt = host.mgmt();
        let bcfg = BridgeConfig { pcap: Some(pcap.clone()), drop_from_vm: loss, drop_to_vm: loss, drop_only_qp: Some(1), seed, ..Default::default() };
        let session = Session::start_paced(&cfg, bcfg, host, dev.inbound_backlog())?;
        Ok(CmLab { dev, session, pcap, ip, mac, mgmt })
    }
}

impl CmLab {
    /// Wait for the VM to end; its outcome and every MAD on QP1 of the run that crossed the link, and the MADs
    /// the link dropped (from the VM, to it).
    pub(super) fn finish(self) -> Result<(super::VmOutcome, Vec<(bool, Mad)>, (u64, u64))> {
        let (out, report) = self.session.finish()?;
        Ok((out, qp1_mads(&self.pcap, self.ip)?, (report.stats.dropped_from_vm, report.stats.dropped_to_vm)))
    }
}

/// Every MAD on QP1 in a capture: (from the VM, i.e. not from `ours`; the MAD).
fn qp1_mads(pcap: &std::path::Path, ours: Ipv4Addr) -> Result<Vec<(bool, Mad)>> {
    let mut mads = Vec::new();
    let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(pcap)?)?;
    while let Some(p) = rd.next_packet() {
        if let Ok(testbench::wire::Frame::Roce(f)) = testbench::wire::parse_ethernet(&p?.data) {
            if f.packet.bth.dest_qpn == 1 {
                if let Ok(m) = Mad::parse(&f.packet.payload) {
                    mads.push((f.ip.src() != IpAddr::V4(ours), m));
                }
            }
        }
    }
    Ok(mads)
}

/// The VM's script for a tool server `cmd` (started in the background with a 60 s timeout): it says
/// `=== CM_SERVER_UP ===` a second after the start, then waits for the server and prints its output and exit
/// status ([`vm_server_result`]).
fn vm_server_script(cmd: &str) -> String {
    format!(
        "timeout 60 {cmd} > /tmp/server.log 2>&1 &\nsleep 1\necho '=== CM_SERVER_UP ==='\nwait $!\nrc=$?\ncat /tmp/server.log\necho \"=== CM_SERVER rc=$rc ===\"\n"
    )
}

/// The server's exit status and what the console shows after it came up ([`vm_server_script`]).
fn vm_server_result(log: &str) -> (Option<i32>, String) {
    let rc = log.lines().find_map(|l| l.split("=== CM_SERVER rc=").nth(1)?.split(' ').next()?.parse().ok());
    (rc, log.split("=== CM_SERVER_UP ===").nth(1).unwrap_or("").to_string())
}

/// rping's port (7174) in the TCP port space: the service ID our agent listens on in [`probe`].
pub const RPING_PORT: u16 = 7174;

/// The clients the CM lab test runs in the VM against our address (10.0.0.2): rping to a port nobody listens
/// on, rping with three 64-byte pings checked (`-V`), then with five of 2,000 bytes, ucmatose with two
/// connections, udaddy (our UD service, resolved by SIDR).
pub const LAB_CLIENTS: &[(&str, &str)] = &[
    ("rping_no_listener", "rping -c -a 10.0.0.2 -p 9999 -C 1 -S 64"),
    ("rping", "rping -c -a 10.0.0.2 -p 7174 -C 3 -S 64 -V -v"),
    ("rping_2000", "rping -c -a 10.0.0.2 -p 7174 -C 5 -S 2000 -V -v"),
    ("ucmatose", "ucmatose -s 10.0.0.2 -c 2"),
    ("udaddy", "udaddy -s 10.0.0.2"),
];

/// Boot the lab VM against the RTL endpoint with the CM agent on QP1, listening on rping's service ID with
/// an rping server ([`super::rping`]) behind it, and run `clients` in the VM: (name, command) each.
pub fn probe(image: &super::VmImage, run_name: &str, clients: &[(&str, &str)]) -> Result<CmProbe> {
    probe_lossy(image, run_name, clients, 0.0, 1)
}

/// [`probe`] with `loss` of the MADs dropped each way on the link (seeded by `seed`; nothing else dropped).
pub fn probe_lossy(image: &super::VmImage, run_name: &str, clients: &[(&str, &str)], loss: f64, seed: u64) -> Result<CmProbe> {
    let mut script = String::new();
    for (name, cmd) in clients {
        script.push_str(&format!(
            "echo '=== CM_CLIENT_BEGIN {name} ==='\ntimeout 30 {cmd}; echo \"=== CM_CLIENT {name} rc=$? ===\"\n"
        ));
    }
    let mut lab = CmLab::start(image, run_name, script, loss, seed)?;
    let (dev, our_ip, host_cfg_mac) = (lab.dev.clone(), lab.ip, lab.mac);
    let mut agent = None;
    let mut error = None;
    let mut events = Vec::new();
    let mut servers: Vec<(u32, super::rping::RpingServer)> = Vec::new();
    let mut cmatose: Vec<super::cmatose::CmatoseServer> = Vec::new();
    let mut udaddy: Option<super::udaddy::UdaddyServer> = None;
    let mut pings = Vec::new();
    match CmAgent::open(dev.clone(), host_cfg_mac, our_ip) {
        Ok(a) => agent = Some(a),
        Err(e) => error = Some(format!("{e:#}")),
    }
    if let Some(a) = agent.as_mut() {
        a.listen(testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_TCP, RPING_PORT));
        let cmatose_sid = testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_TCP, super::cmatose::PORT);
        a.listen(cmatose_sid);
        a.listen(testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_UDP, super::udaddy::PORT));
        let pd = dev.alloc_pd()?;
        let mut psn = 0x0A_B000u32;
        // answer until the VM's script ends
        'run: while !lab.session.vm.wait_for_log("SCRIPT_EXIT", std::time::Duration::from_millis(2)) {
            let evs = match a.poll() {
                Ok(e) => e,
                Err(e) => {
                    error = Some(format!("{e:#}"));
                    break;
                }
            };
            for ev in evs {
                match &ev {
                    CmEvent::ConnectRequest { id, req, peer } => {
                        psn = psn.wrapping_add(0x1_0001) & 0xFF_FFFF;
                        let mac = match a.mac_of(*peer) {
                            Ok(m) => m,
                            Err(e) => {
                                error = Some(format!("{e:#}"));
                                break 'run;
                            }
                        };
                        if req.service_id == cmatose_sid {
                            match super::cmatose::CmatoseServer::accept(dev.clone(), pd, a, *id, req, *peer, mac, psn) {
                                Ok(s) => cmatose.push(s),
                                Err(e) => {
                                    error = Some(format!("accepting: {e:#}"));
                                    break 'run;
                                }
                            }
                        } else {
                        match super::rping::RpingServer::accept(dev.clone(), pd, a, *id, req, *peer, mac, psn) {
                            Ok(s) => servers.push((*id, s)),
                            Err(e) => {
                                error = Some(format!("accepting: {e:#}"));
                                break 'run;
                            }
                        }
                        }
                    }
                    CmEvent::SidrRequest { tid, req, peer } => {
                        let r = match udaddy.as_ref() {
                            Some(u) => Ok(u.qpn),
                            None => super::udaddy::UdaddyServer::new(dev.clone(), pd).map(|u| udaddy.insert(u).qpn),
                        }
                        .and_then(|qpn| a.sidr_reply(*peer, *tid, req, qpn, testbench::wire::mad::RDMA_UDP_QKEY));
                        if let Err(e) = r {
                            error = Some(format!("udaddy: {e:#}"));
                            break 'run;
                        }
                    }
                    CmEvent::Established { id } => {
                        if let Some(s) = cmatose.iter_mut().find(|s| s.id == *id) {
                            if let Err(e) = s.start() {
                                error = Some(format!("{e:#}"));
                                break 'run;
                            }
                        }
                    }
                    CmEvent::Disconnected { id } => {
                        if let Some(i) = servers.iter().position(|s| s.0 == *id) {
                            pings.extend(servers.remove(i).1.pings);
                        }
                    }
                    _ => {}
                }
                events.push(ev);
            }
            for (_, s) in servers.iter_mut() {
                if let Err(e) = s.poll() {
                    error = Some(format!("{e:#}"));
                    break 'run;
                }
            }
            for s in cmatose.iter_mut() {
                if let Err(e) = s.poll(a) {
                    error = Some(format!("{e:#}"));
                    break 'run;
                }
            }
            if let Some(u) = udaddy.as_mut() {
                if let Err(e) = u.poll(a) {
                    error = Some(format!("{e:#}"));
                    break 'run;
                }
            }
        }
        // the VM's udaddy may have its replies and exit before the completions of our sends are in (a UD send
        // completes on transmit, which the RTL reports a little later under load): take them, up to 5 s
        let end = Instant::now() + Duration::from_secs(5);
        while let Some(u) = udaddy.as_mut().filter(|u| error.is_none() && u.received == super::udaddy::MESSAGES && !u.done()) {
            if let Err(e) = u.poll(a) {
                error = Some(format!("{e:#}"));
            }
            if Instant::now() > end {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for (_, s) in servers {
        pings.extend(s.pings);
    }
    let (out, mads, dropped) = lab.finish()?;
    let clients = clients
        .iter()
        .map(|(name, _)| {
            let begin = format!("=== CM_CLIENT_BEGIN {name} ===");
            let tag = format!("=== CM_CLIENT {name} rc=");
            let text: String = out.log.split(&begin).nth(1).map_or(String::new(), |t| t.split(&tag).next().unwrap_or("").to_string());
            let rc = out.log.lines().find_map(|l| l.split(&tag).nth(1)?.split(' ').next()?.parse().ok());
            (name.to_string(), rc, text)
        })
        .collect();
    let cmatose = cmatose.iter().map(|s| (s.received, s.finished)).collect();
    let udaddy = udaddy.map(|u| (u.received, u.replies, u.bad));
    Ok(CmProbe { clients, stats: agent.map(|a| a.core.stats).unwrap_or_default(), events, pings, cmatose, udaddy, mads, dropped, error })
}

use super::LAB_VM_IP as VM;

/// One run of a client of ours against a server the VM starts: the server's exit status and output, every MAD
/// of the run, the agent's counts (when our side completed) and our side's error.
struct ClientRun {
    server_rc: Option<i32>,
    server_out: String,
    mads: Vec<(bool, Mad)>,
    stats: CmStats,
    error: Option<String>,
}

/// Boot the lab VM against the RTL endpoint with the tool server `cmd` ([`vm_server_script`]), open our agent,
/// wait for the server (`what` names it), then run our side: `body` with the endpoint, the agent and a PD.
fn client_run(image: &super::VmImage, run_name: &str, cmd: &str, what: &str, body: impl FnOnce(&Dev, &mut CmAgent, testbench::model::Pd) -> Result<()>) -> Result<ClientRun> {
    let mut lab = CmLab::start(image, run_name, vm_server_script(cmd), 0.0, 1)?;
    let (dev, our_ip, our_mac) = (lab.dev.clone(), lab.ip, lab.mac);
    let mut stats = CmStats::default();
    let error = (|| -> Result<()> {
        let mut agent = CmAgent::open(dev.clone(), our_mac, our_ip)?;
        if !lab.session.vm.wait_for_log("=== CM_SERVER_UP ===", Duration::from_secs(60)) {
            bail!("the VM's {what} server did not start");
        }
        let pd = dev.alloc_pd()?;
        body(&dev, &mut agent, pd)?;
        stats = agent.core.stats.clone();
        Ok(())
    })()
    .err()
    .map(|e| format!("{e:#}"));
    let (out, mads, _) = lab.finish()?;
    let (server_rc, server_out) = vm_server_result(&out.log);
    Ok(ClientRun { server_rc, server_out, mads, stats, error })
}

/// What a run of our rping client against the VM's `rping -s` shows.
#[derive(Debug)]
pub struct CmClientProbe {
    /// The VM's rping server: exit status and output.
    pub server_rc: Option<i32>,
    pub server_out: String,
    pub pings: u32,
    pub mismatches: u32,
    pub events: Vec<CmEvent>,
    pub stats: CmStats,
    pub mads: Vec<(bool, Mad)>,
    pub error: Option<String>,
}

/// Boot the lab VM against the RTL endpoint, start `rping -s` there, and connect to it from our side through
/// the CM agent's active side ([`CmAgent::connect`]) with our rping client ([`super::rping::RpingClient`]):
/// `count` pings of `size` bytes, each checked, then our DREQ.
pub fn probe_client(image: &super::VmImage, run_name: &str, count: u32, size: u32) -> Result<CmClientProbe> {
    let mut events = Vec::new();
    let mut pings = (0, 0);
    let cmd = format!("rping -s -a 10.0.0.1 -p {RPING_PORT} -C {count} -S {size} -v");
    let run = client_run(image, run_name, &cmd, "rping", |dev, agent, pd| {
        let vm = VM;
        let psn = 0x5A_5000;
        let mut client = super::rping::RpingClient::new(dev.clone(), pd, size, count, psn)?;
        let sid = testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_TCP, RPING_PORT);
        let mut id = agent.connect(vm, sid, client.qpn, psn, 1024, 1, 0xC000 | (client.qpn as u16))?;
        let mut tries = 1;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut connected = false;
        let mut shut = false;
        loop {
            if Instant::now() > deadline {
                bail!("no end within 60 s: {} pings, {:?}", client.done, events);
            }
            for ev in agent.poll()? {
                match &ev {
                    CmEvent::ConnectReply { id: i, rep } if *i == id => {
                        let mac = agent.mac_of(vm)?;
                        client.connected(agent, id, rep, vm, mac, 1024)?;
                        connected = true;
                    }
                    // the server may not listen yet: ask again, as often as rping's own retries would
                    CmEvent::Rejected { id: i, reason: 8 } if *i == id && tries < 10 => {
                        std::thread::sleep(Duration::from_millis(300));
                        id = agent.connect(vm, sid, client.qpn, psn, 1024, 1, 0xC000 | (client.qpn as u16))?;
                        tries += 1;
                    }
                    CmEvent::Disconnected { id: i } if *i == id => {
                        events.push(ev);
                        return Ok(());
                    }
                    CmEvent::Rejected { .. } | CmEvent::Unreachable { .. } => {
                        events.push(ev.clone());
                        bail!("connecting: {ev:?}");
                    }
                    _ => {}
                }
                events.push(ev);
            }
            if connected && !shut && client.poll()? {
                pings = (client.done, client.mismatches);
                client.shut()?;
                agent.disconnect(id)?;
                shut = true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    })?;
    let ClientRun { server_rc, server_out, mads, stats, error } = run;
    Ok(CmClientProbe { server_rc, server_out, pings: pings.0, mismatches: pings.1, events, stats, mads, error })
}

/// What a run of our ucmatose client against the VM's `ucmatose` server shows.
#[derive(Debug)]
pub struct CmatoseClientProbe {
    pub server_rc: Option<i32>,
    pub server_out: String,
    /// Per connection: messages received, replies sent, ended by the server's DREQ.
    pub connections: Vec<(u32, u32, bool)>,
    pub stats: CmStats,
    pub mads: Vec<(bool, Mad)>,
    pub error: Option<String>,
}

/// Boot the lab VM against the RTL endpoint, start `ucmatose -c N` there, and connect `n` times to it from
/// our side ([`super::cmatose::CmatoseClient`]): the server sends ten messages on each, we reply with ten, its
/// DREQs end them.
pub fn probe_cmatose_client(image: &super::VmImage, run_name: &str, n: u32) -> Result<CmatoseClientProbe> {
    let mut clients: Vec<(super::cmatose::CmatoseClient, bool)> = Vec::new();
    let run = client_run(image, run_name, &format!("ucmatose -c {n}"), "ucmatose", |dev, agent, pd| {
        let vm = VM;
        for i in 0..n {
            clients.push((super::cmatose::CmatoseClient::connect(dev.clone(), pd, agent, vm, 0x6C_0000 + 0x1000 * i)?, false));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        // until every connection has ended and every reply's completion is in
        while clients.iter().any(|c| !c.1 || c.0.replies < super::cmatose::MESSAGES) {
            if Instant::now() > deadline {
                bail!("no end within 60 s: {:?}", clients.iter().map(|c| (c.0.received, c.0.replies, c.1)).collect::<Vec<_>>());
            }
            for ev in agent.poll()? {
                match &ev {
                    CmEvent::ConnectReply { id, rep } => {
                        let mac = agent.mac_of(vm)?;
                        let c = clients.iter_mut().find(|c| c.0.id == *id).context("a REP for no client")?;
                        c.0.connected(agent, rep, vm, mac)?;
                    }
                    CmEvent::Disconnected { id } => {
                        if let Some(c) = clients.iter_mut().find(|c| c.0.id == *id) {
                            c.1 = true;
                        }
                    }
                    CmEvent::Rejected { .. } | CmEvent::Unreachable { .. } => bail!("connecting: {ev:?}"),
                    _ => {}
                }
            }
            for c in clients.iter_mut() {
                c.0.poll()?;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    })?;
    let ClientRun { server_rc, server_out, mads, stats, error } = run;
    let connections = clients.iter().map(|c| (c.0.received, c.0.replies, c.1)).collect();
    Ok(CmatoseClientProbe { server_rc, server_out, connections, stats, mads, error })
}

/// What a run of our udaddy client against the VM's `udaddy` server shows: the server's exit status and
/// output, our messages sent, replies received and bad ones, the agent's counts and the CM MADs.
#[derive(Debug)]
pub struct UdaddyClientProbe {
    pub server_rc: Option<i32>,
    pub server_out: String,
    pub sent: u32,
    pub received: u32,
    pub bad: u32,
    pub sidr: Option<CmSidrRep>,
    pub stats: CmStats,
    pub mads: Vec<(bool, Mad)>,
    pub error: Option<String>,
}

/// Boot the lab VM against the RTL endpoint, start `udaddy` (the server) there, resolve its service by SIDR
/// from our side and exchange its ten messages ([`super::udaddy::UdaddyClient`]).
pub fn probe_udaddy_client(image: &super::VmImage, run_name: &str) -> Result<UdaddyClientProbe> {
    let mut client = None;
    let mut sidr = None;
    let run = client_run(image, run_name, "udaddy", "udaddy", |dev, agent, pd| {
        let vm = VM;
        let c = client.insert(super::udaddy::UdaddyClient::new(dev.clone(), pd)?);
        let sid = testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_UDP, super::udaddy::PORT);
        let id = agent.sidr_request(vm, sid, 0xC000 | c.qpn as u16)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.received < super::udaddy::MESSAGES || c.sent < super::udaddy::MESSAGES {
            if Instant::now() > deadline {
                bail!("no end within 60 s: {} sent, {} received", c.sent, c.received);
            }
            for ev in agent.poll()? {
                match ev {
                    CmEvent::SidrReply { request_id, rep } if request_id == id => {
                        let mac = agent.mac_of(vm)?;
                        c.resolved(&rep, vm, mac)?;
                        sidr = Some(rep);
                    }
                    CmEvent::Unreachable { .. } => bail!("the SIDR request went unanswered"),
                    _ => {}
                }
            }
            c.poll()?;
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    })?;
    let ClientRun { server_rc, server_out, mads, stats, error } = run;
    let (sent, received, bad) = client.as_ref().map_or((0, 0, 0), |c| (c.sent, c.received, c.bad));
    Ok(UdaddyClientProbe { server_rc, server_out, sent, received, bad, sidr, stats, mads, error })
}
