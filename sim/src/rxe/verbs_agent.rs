//! Scripted verbs in the rxe VM: `rxe-verbs` (`sim/vm/agent/rxe-verbs.c`, built into the VM image against
//! libibverbs) connects to our side over the lab's TCP and runs one verbs call per line we send, answering each
//! with one line ("ok key=value ..." or "err what"). [`VerbsAgent`] is our end of it; [`probe_windows`] uses
//! it to make rxe allocate, bind and invalidate memory windows while the RTL accesses them.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use testbench::model::{
    AccessFlags, AddressVector, Cq, Pd, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, WcStatus,
    WorkCompletion, WrOpcode,
};

use super::cm::CmLab;
use super::oob::OobConn;
use super::verbs::Dev;

/// The port our side listens on for the agent.
pub const PORT: u16 = 18700;
use super::LAB_VM_IP as VM_IP;

/// Our end of the agent's connection.
pub struct VerbsAgent {
    conn: Box<dyn OobConn>,
    /// Every call and its answer, in order.
    pub log: Vec<String>,
}

/// An "ok" answer's values by key.
pub type Reply = BTreeMap<String, String>;

/// A value of an answer as a number.
pub fn num(r: &Reply, k: &str) -> Result<u64> {
    r.get(k).with_context(|| format!("no {k} in {r:?}"))?.parse().with_context(|| format!("{k} in {r:?}"))
}

impl VerbsAgent {
    pub fn new(conn: Box<dyn OobConn>) -> Self {
        VerbsAgent { conn, log: Vec::new() }
    }

    /// Run one command; its answer's values, or the agent's error.
    pub fn call(&mut self, cmd: &str) -> Result<Reply> {
        self.conn.send_all(format!("{cmd}\n").as_bytes(), Duration::from_secs(10))?;
        let mut line = Vec::new();
        loop {
            let b = self.conn.recv_exact(1, Duration::from_secs(60)).with_context(|| format!("the agent's answer to `{cmd}`"))?;
            if b[0] == b'\n' {
                break;
            }
            line.push(b[0]);
            anyhow::ensure!(line.len() < 16384, "the agent's answer to `{cmd}` has no end");
        }
        let line = String::from_utf8_lossy(&line).to_string();
        self.log.push(format!("{cmd} -> {line}"));
        match line.strip_prefix("ok") {
            Some(rest) => Ok(rest.split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            None => bail!("rxe-verbs `{cmd}`: {line}"),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What [`probe_windows`] saw.
#[derive(Debug, Default)]
pub struct WindowsProbe {
    /// The agent's calls and answers.
    pub calls: Vec<String>,
    /// Our completions in order: (what, status).
    pub ours: Vec<(String, WcStatus)>,
    /// rxe's 64 bytes where each of our WRITEs aimed, after it: (what, hex).
    pub rxe_bytes: Vec<(String, String)>,
    /// Whether each of our READs brought rxe's bytes: (what, equal).
    pub read_back: Vec<(String, bool)>,
    /// rxe's receive completion of our SEND_WITH_INV: status, flags, the imm/invalidated-rkey field, byte_len;
    /// and the rkey we named.
    pub send_inv: Option<(u32, u32, u32, u32, u32)>,
    /// rxe's SEND_WITH_INV naming our fast-registration MR: rxe's send status, our receive completion, the
    /// key rxe named; then rxe's WRITE through that key: its status, and whether our bytes stayed as they were.
    pub rxe_send_inv: Option<(u32, WorkCompletion, u32)>,
    pub rxe_write_after_inv: Option<(u32, bool)>,
    /// Our SEND_WITH_INV naming a key rxe may not invalidate (what, our completion, rxe's receive completion:
    /// status, flags, the imm/invalidated-rkey field), then the agent's view of it.
    pub bad_inv: Vec<(String, WcStatus, Option<(u32, u32, u32)>)>,
    /// Our LOCAL_INV of our fast-registration MR: rxe's WRITE through the key before it (status), our
    /// completion of it, rxe's WRITE through the key after it (status), and whether our bytes stayed as the
    /// first WRITE left them.
    pub local_inv: Option<(u32, WorkCompletion, u32, bool)>,
    /// A type 1 window of ours: rxe's WRITE through it (status, whether it landed), rxe's READ through it
    /// (status, whether it brought our bytes), rxe's WRITE that runs 32 bytes past its end inside the MR (status,
    /// whether our bytes stayed as they were).
    pub our_window: Option<(u32, bool, u32, bool, u32, bool)>,
    /// A type 2 window of ours bound by a BIND_MW WQE: our bind's completion, rxe's WRITE through it (status,
    /// whether it landed), rxe's SEND_WITH_INV naming it (its status, our receive completion), rxe's WRITE
    /// after that (status, whether our bytes stayed as they were); the window's key.
    pub our_window2: Option<(WorkCompletion, u32, bool, u32, WorkCompletion, u32, bool, u32)>,
    /// NAKs rxe sent, by AETH syndrome; NAKs we sent.
    pub naks: Vec<u8>,
    pub our_naks: Vec<u8>,
    pub vm_rc: Option<i32>,
    pub error: Option<String>,
}

/// Our RC QP on the RTL, connected to the agent's, with a 64 KiB buffer.
struct Ours {
    dev: Dev,
    pd: Pd,
    qpn: u32,
    cq: Cq,
    lkey: u32,
    buf: u64,
    next: u64,
}

impl Ours {
    /// Post one WR (`rkey` is the remote key, or for SEND_WITH_INV the key to invalidate) and wait for its
    /// completion.
    fn post(&mut self, op: WrOpcode, local: u64, len: u32, remote: u64, rkey: u32) -> Result<WcStatus> {
        self.next += 1;
        let mut wr = SendWr::new(self.next, op, vec![Sge { addr: local, length: len, lkey: self.lkey }]);
        (wr.remote_addr, wr.rkey) = (remote, rkey);
        if op == WrOpcode::SendWithInv {
            (wr.rkey, wr.invalidate_rkey) = (0, rkey);
        }
        self.dev.post_send(self.qpn, wr)?;
        let wc = self.next_wc(&format!("our {op:?}"))?;
        anyhow::ensure!(wc.wr_id == self.next, "completion {} for WR {}", wc.wr_id, self.next);
        Ok(wc.status)
    }

    /// The next completion on our CQ, waiting up to 30 s (`what` names it in the error).
    fn next_wc(&self, what: &str) -> Result<WorkCompletion> {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(wc) = self.dev.poll_cq(self.cq, 1)?.pop() {
                return Ok(wc);
            }
            if Instant::now() > end {
                bail!("no completion for {what}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A new QP pair: the agent's next RC QP (`open`) and one of ours on the RTL (a 64 KiB buffer), connected.
fn pair(a: &mut VerbsAgent, dev: &Dev, our_ip: Ipv4Addr, n: u32) -> Result<Ours> {
    pair_timed(a, dev, our_ip, n, 14, 7)
}

/// [`pair`] with our QP's retransmit timeout (4.096 us x 2^`timeout`) and retry count.
fn pair_timed(a: &mut VerbsAgent, dev: &Dev, our_ip: Ipv4Addr, n: u32, timeout: u8, retry: u8) -> Result<Ours> {
    let opened = a.call("open")?;
    let their_qpn = num(&opened, "qpn")? as u32;
    let their_gid = opened.get("gid").context("no gid")?.clone();
    anyhow::ensure!(their_gid == hex(&VM_IP.to_ipv6_mapped().octets()), "the agent's GID {their_gid} is not 10.0.0.1's");
    let buf = dev.alloc(64 << 10)?;
    let pd = dev.alloc_pd()?;
    let (lkey, _) = dev.reg_mr(pd, buf, 64 << 10, AccessFlags::ALL)?;
    let cq = dev.create_cq(64)?;
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
    let (our_psn, their_psn) = (0x12_3400 + n, 0x56_7800 + n);
    a.call(&format!("connect {qpn} {our_psn} {their_psn} {} 3", hex(&our_ip.to_ipv6_mapped().octets())))?;
    let mac = dev.resolve(VM_IP)?.context("no MAC for the VM")?;
    let av = AddressVector::new(mac, IpAddr::V4(VM_IP));
    for attr in [
        QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), ..Default::default() },
        QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(1024),
            dest_qp_num: Some(their_qpn),
            rq_psn: Some(their_psn),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(12),
            av: Some(av),
            ..Default::default()
        },
        QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(our_psn), timeout: Some(timeout), retry_cnt: Some(retry), rnr_retry: Some(7), max_rd_atomic: Some(16), ..Default::default() },
    ] {
        dev.modify_qp(qpn, &attr)?;
    }
    Ok(Ours { dev: dev.clone(), pd, qpn, cq, lkey, buf, next: 0 })
}

fn pat(seed: u8) -> Vec<u8> {
    (0..64u8).map(|i| i.wrapping_mul(7).wrapping_add(seed)).collect()
}

impl Ours {
    /// Our WRITE of 64 bytes (`seed`'s pattern) through `rkey` at `addr`, then rxe's buffer (MR 0) at `off`.
    fn write(&mut self, p: &mut WindowsProbe, a: &mut VerbsAgent, what: &str, rkey: u32, addr: u64, off: u64, seed: u8) -> Result<()> {
        self.dev.write_mem(self.buf, &pat(seed))?;
        let st = self.post(WrOpcode::RdmaWrite, self.buf, 64, addr + off, rkey)?;
        p.ours.push((format!("{what} WRITE"), st));
        p.rxe_bytes.push((format!("{what} WRITE"), a.call(&format!("peek 0 {off} 64"))?.get("hex").cloned().unwrap_or_default()));
        Ok(())
    }

    /// rxe's bytes (`seed`'s pattern) at `off` of its buffer, then our READ of 64 bytes of them through `rkey`:
    /// whether it brought them.
    fn read(&mut self, p: &mut WindowsProbe, a: &mut VerbsAgent, what: &str, rkey: u32, addr: u64, off: u64, seed: u8) -> Result<()> {
        a.call(&format!("poke 0 {off} {}", hex(&pat(seed))))?;
        self.dev.write_mem(self.buf + 4096, &[0; 64])?;
        let st = self.post(WrOpcode::RdmaRead, self.buf + 4096, 64, addr + off, rkey)?;
        p.ours.push((format!("{what} READ"), st));
        p.read_back.push((what.to_string(), self.dev.read_mem(self.buf + 4096, 64)? == pat(seed)));
        Ok(())
    }
}

/// Boot the lab VM with the agent against the RTL endpoint and, through the agent, make rxe register an 8 KiB
/// buffer (remote write and read, MW bind) and:
/// 1. bind a type 1 window (`ibv_bind_mw`) to its first 4 KiB: we WRITE 64 bytes through it (at offset 128)
///    and READ 64 bytes rxe wrote (at 256);
/// 2. bind a type 2 window (an `IBV_WR_BIND_MW`) to the second 4 KiB: the same at 4096 + 128 and 4096 + 256;
/// 3. invalidate the type 2 window (an `IBV_WR_LOCAL_INV`); our next WRITE through it (its QP then in error);
/// 4. on a new QP pair, a WRITE through the type 1 window that runs 32 bytes past its end;
/// 5. on a new QP pair, a READ through a third window (type 1) bound for remote write only;
/// 6. a type 2 window bound on one QP pair's QP, our WRITE through it from another pair;
/// 7. on a new pair, a type 2 window bound and a receive posted by rxe, our SEND_WITH_INV naming the window:
///    rxe's receive completion (flags, invalidated rkey, length), then our WRITE through the window;
/// 8. on a new pair, rxe's SEND_WITH_INV naming a fast-registration MR of ours: our receive completion, then
///    rxe's WRITE through that key and our bytes under it;
/// 9. on new pairs, our SEND_WITH_INV naming the type 1 window, then rxe's MR: what each side reports;
/// 10. on a new pair, rxe's WRITE through a fast-registration MR of ours, our LOCAL_INV of it, rxe's WRITE
///     again, and our bytes;
/// 11. on a new pair, a type 1 window of ours over 2 KiB of an MR: rxe's WRITE and READ through it, then a
///     WRITE of rxe's that runs past its end;
/// 12. on a new pair, a type 2 window of ours bound by a BIND_MW WQE: rxe's WRITE through it, rxe's
///     SEND_WITH_INV naming it, rxe's WRITE again.
/// Each pair's QPs go to error after the first failed access, so each failure has its own pair.
pub fn probe_windows(image: &super::VmImage, run_name: &str) -> Result<WindowsProbe> {
    let script = format!("{}\nrxe-verbs 10.0.0.2 {PORT} $RNIC_GID\n", super::GID_SCRIPT);
    let lab = CmLab::start(image, run_name, script, 0.0, 1)?;
    let mut p = WindowsProbe::default();
    let oob = super::oob::Oob::Lab { mgmt: lab.mgmt.clone(), peer: VM_IP };
    let mut agent: Option<VerbsAgent> = None;
    let r = (|| -> Result<()> {
        let conn = oob.listen(PORT)?.accept(Duration::from_secs(90)).context("the VM's agent did not connect")?;
        let a = agent.insert(VerbsAgent::new(conn));
        let dev = lab.dev.clone();
        let mut ours = pair(a, &dev, lab.ip, 0)?;
        let mr0 = a.call("mr 8192 wrb")?;
        let (addr, mr0_rkey) = (num(&mr0, "addr")?, num(&mr0, "rkey")? as u32);
        // 1. type 1 window over the first 4 KiB
        a.call("mw 1")?;
        let rkey1 = num(&a.call("bind 0 0 0 4096 wr")?, "rkey")? as u32;
        ours.write(&mut p, a, "type 1 window", rkey1, addr, 128, 0x10)?;
        ours.read(&mut p, a, "type 1 window", rkey1, addr, 256, 0x11)?;
        // 2. type 2 window over the second 4 KiB
        a.call("mw 2")?;
        let rkey2 = num(&a.call("bind 1 0 4096 4096 wr")?, "rkey")? as u32;
        ours.write(&mut p, a, "type 2 window", rkey2, addr, 4096 + 128, 0x20)?;
        ours.read(&mut p, a, "type 2 window", rkey2, addr, 4096 + 256, 0x21)?;
        // 3. invalidated
        let inv = a.call(&format!("inv {rkey2}"))?;
        anyhow::ensure!(num(&inv, "status")? == 0, "rxe's Local Invalidate of the window failed: {inv:?}");
        ours.write(&mut p, a, "invalidated type 2 window", rkey2, addr, 4096 + 128, 0x30)?;
        // 4. past the end of the type 1 window
        let mut ours = pair(a, &dev, lab.ip, 1)?;
        ours.write(&mut p, a, "type 1 window, 32 bytes past its end", rkey1, addr, 4096 - 32, 0x40)?;
        // 5. a write-only window read
        let mut ours = pair(a, &dev, lab.ip, 2)?;
        a.call("mw 1")?;
        let rkey3 = num(&a.call("bind 2 0 0 4096 w")?, "rkey")? as u32;
        ours.read(&mut p, a, "write-only type 1 window", rkey3, addr, 512, 0x50)?;
        // 6. a type 2 window bound on another QP
        let mut ours = pair(a, &dev, lab.ip, 3)?;
        a.call("mw 2")?;
        let rkey4 = num(&a.call("bind 3 0 0 4096 wr")?, "rkey")? as u32;
        let mut other = pair(a, &dev, lab.ip, 4)?;
        other.write(&mut p, a, "type 2 window bound on another QP", rkey4, addr, 640, 0x60)?;
        ours.write(&mut p, a, "type 2 window bound on this QP", rkey4, addr, 768, 0x70)?;
        // 7. invalidated by our SEND_WITH_INV
        let mut ours = pair(a, &dev, lab.ip, 5)?;
        a.call("mw 2")?;
        let rkey5 = num(&a.call("bind 4 0 0 4096 wr")?, "rkey")? as u32;
        a.call("recv 0 6144 64")?;
        dev.write_mem(ours.buf, &pat(0x80))?;
        let st = ours.post(WrOpcode::SendWithInv, ours.buf, 64, 0, rkey5)?;
        p.ours.push(("SEND_WITH_INV".into(), st));
        let wc = a.call("poll")?;
        p.send_inv = Some((num(&wc, "status")? as u32, num(&wc, "flags")? as u32, num(&wc, "ex")? as u32, num(&wc, "byte_len")? as u32, rkey5));
        p.rxe_bytes.push(("SEND_WITH_INV".into(), a.call("peek 0 6144 64")?.get("hex").cloned().unwrap_or_default()));
        ours.write(&mut p, a, "type 2 window invalidated by our SEND_WITH_INV", rkey5, addr, 896, 0x90)?;
        // 8. rxe's SEND_WITH_INV naming our fast-registration MR, then rxe's WRITE through it
        let ours = pair(a, &dev, lab.ip, 6)?;
        let fbuf = dev.alloc(4096)?;
        dev.write_mem(fbuf, &[0xEE; 4096])?;
        let (fkey, _) = dev.reg_mr_fast(ours.pd, fbuf, 4096, AccessFlags::ALL)?;
        let sge = Sge { addr: ours.buf + 8192, length: 256, lkey: ours.lkey };
        dev.post_recv(ours.qpn, RecvWr { wr_id: 88, sg_list: vec![sge] })?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xA0))))?;
        let st = num(&a.call(&format!("send_inv 0 7168 64 {fkey}"))?, "status")? as u32;
        let wc = ours.next_wc("rxe's SEND_WITH_INV (our receive)")?;
        p.rxe_send_inv = Some((st, wc, fkey));
        let st = num(&a.call(&format!("write 0 7168 64 {fbuf} {fkey}"))?, "status")? as u32;
        p.rxe_write_after_inv = Some((st, dev.read_mem(fbuf, 4096)? == vec![0xEE; 4096]));
        // 9. our SEND_WITH_INV naming keys rxe may not invalidate: its type 1 window, its ibv_reg_mr MR (our QP
        //    with a 1 ms timeout and no retry, so that a SEND rxe left unanswered would fail within seconds)
        for (i, (what, key)) in [("type 1 window", rkey1), ("ibv_reg_mr MR", mr0_rkey)].into_iter().enumerate() {
            let mut ours = pair_timed(a, &dev, lab.ip, 7 + i as u32, 8, 0)?;
            a.call("recv 0 6400 64")?;
            let st = ours.post(WrOpcode::SendWithInv, ours.buf, 64, 0, key)?;
            let theirs = a.call("poll").ok().and_then(|wc| {
                Some((num(&wc, "status").ok()? as u32, num(&wc, "flags").ok()? as u32, num(&wc, "ex").ok()? as u32))
            });
            p.bad_inv.push((what.to_string(), st, theirs));
        }
        // 10. our LOCAL_INV between two of rxe's WRITEs through our fast-registration MR
        let mut ours = pair(a, &dev, lab.ip, 9)?;
        let fbuf = dev.alloc(4096)?;
        dev.write_mem(fbuf, &[0xEE; 4096])?;
        let (fkey, _) = dev.reg_mr_fast(ours.pd, fbuf, 4096, AccessFlags::ALL)?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xB0))))?;
        let before = num(&a.call(&format!("write 0 7168 64 {} {fkey}", fbuf + 64))?, "status")? as u32;
        ours.next += 1;
        let mut wr = SendWr::new(ours.next, WrOpcode::LocalInv, vec![]);
        wr.invalidate_rkey = fkey;
        ours.dev.post_send(ours.qpn, wr)?;
        let wc = ours.next_wc("our LOCAL_INV")?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xC0))))?;
        let after = num(&a.call(&format!("write 0 7168 64 {} {fkey}", fbuf + 64))?, "status")? as u32;
        let mut want = vec![0xEE; 4096];
        want[64..128].copy_from_slice(&pat(0xB0));
        p.local_inv = Some((before, wc, after, dev.read_mem(fbuf, 4096)? == want));
        // 11. a type 1 window of ours
        let ours = pair(a, &dev, lab.ip, 10)?;
        let wbuf = dev.alloc(8192)?;
        dev.write_mem(wbuf, &[0x77; 8192])?;
        let (mr, _) = dev.reg_mr(ours.pd, wbuf, 8192, AccessFlags::ALL | AccessFlags::MW_BIND)?;
        let mw = dev.alloc_mw(ours.pd)?;
        let rw = AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
        let wkey = dev.bind_mw(ours.qpn, mw, mr, wbuf + 4096, 2048, rw)?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xD0))))?;
        let w_st = num(&a.call(&format!("write 0 7168 64 {} {wkey}", wbuf + 4096 + 128))?, "status")? as u32;
        let landed = dev.read_mem(wbuf + 4096 + 128, 64)? == pat(0xD0);
        dev.write_mem(wbuf + 4096 + 512, &pat(0xD1))?;
        let r_st = num(&a.call(&format!("read 0 7424 64 {} {wkey}", wbuf + 4096 + 512))?, "status")? as u32;
        let brought = a.call("peek 0 7424 64")?.get("hex").cloned().unwrap_or_default() == hex(&pat(0xD1));
        let before = dev.read_mem(wbuf, 8192)?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xD2))))?;
        let past = num(&a.call(&format!("write 0 7168 64 {} {wkey}", wbuf + 4096 + 2048 - 32))?, "status")? as u32;
        p.our_window = Some((w_st, landed, r_st, brought, past, dev.read_mem(wbuf, 8192)? == before));
        // 12. a type 2 window of ours
        let mut ours = pair(a, &dev, lab.ip, 11)?;
        let wbuf = dev.alloc(8192)?;
        dev.write_mem(wbuf, &[0x66; 8192])?;
        let (mr, _) = dev.reg_mr(ours.pd, wbuf, 8192, AccessFlags::ALL | AccessFlags::MW_BIND)?;
        let w0 = dev.alloc_mw2(ours.pd)?;
        let wkey = rnic_driver::verbs::inc_rkey(w0);
        ours.next += 1;
        let mut wr = SendWr::new(ours.next, WrOpcode::BindMw, vec![Sge { addr: wbuf + 4096, length: 2048, lkey: mr }]);
        (wr.rkey, wr.mw_access) = (wkey, rw);
        ours.dev.post_send(ours.qpn, wr)?;
        let bound = ours.next_wc("our BIND_MW")?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xE0))))?;
        let w_st = num(&a.call(&format!("write 0 7168 64 {} {wkey}", wbuf + 4096 + 256))?, "status")? as u32;
        let landed = dev.read_mem(wbuf + 4096 + 256, 64)? == pat(0xE0);
        let sge = Sge { addr: ours.buf + 8192, length: 256, lkey: ours.lkey };
        dev.post_recv(ours.qpn, RecvWr { wr_id: 99, sg_list: vec![sge] })?;
        let inv_st = num(&a.call(&format!("send_inv 0 7168 64 {wkey}"))?, "status")? as u32;
        let recv = ours.next_wc("rxe's SEND_WITH_INV naming our type 2 window (our receive)")?;
        let before = dev.read_mem(wbuf, 8192)?;
        a.call(&format!("poke 0 7168 {}", hex(&pat(0xE1))))?;
        let after = num(&a.call(&format!("write 0 7168 64 {} {wkey}", wbuf + 4096 + 256))?, "status")? as u32;
        p.our_window2 = Some((bound, w_st, landed, inv_st, recv, after, dev.read_mem(wbuf, 8192)? == before, wkey));
        a.call("quit")?;
        Ok(())
    })();
    p.error = r.err().map(|e| format!("{e:#}"));
    if let Some(a) = agent {
        p.calls = a.log;
    }
    let pcap = lab.pcap.clone();
    let ours_ip = lab.ip;
    let (out, _, _) = lab.finish()?;
    p.vm_rc = super::parse_script_rc(&out.log);
    // rxe's NAKs on the link
    let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap)?)?;
    while let Some(pk) = rd.next_packet() {
        if let Ok(testbench::wire::Frame::Roce(f)) = testbench::wire::parse_ethernet(&pk?.data) {
            if f.ip.src() != IpAddr::V4(ours_ip) {
                if let Some(a) = f.packet.aeth().filter(|a| a.syndrome & 0x60 == 0x60) {
                    p.naks.push(a.syndrome);
                }
            } else if let Some(a) = f.packet.aeth().filter(|a| a.syndrome & 0x60 == 0x60) {
                p.our_naks.push(a.syndrome);
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A connection whose peer answers from a script, and records what it was sent.
    struct Scripted {
        answers: Mutex<Vec<u8>>,
        sent: Mutex<Vec<u8>>,
    }

    impl OobConn for Scripted {
        fn send_all(&self, data: &[u8], _: Duration) -> Result<()> {
            self.sent.lock().unwrap().extend_from_slice(data);
            Ok(())
        }
        fn recv_exact(&self, n: usize, _: Duration) -> Result<Vec<u8>> {
            let mut a = self.answers.lock().unwrap();
            anyhow::ensure!(a.len() >= n, "connection closed");
            Ok(a.drain(..n).collect())
        }
        fn flush(&self, _: Duration) -> Result<()> {
            Ok(())
        }
        fn close(&self) {}
        fn abort(&self) {}
    }

    /// One line out per command; "ok k=v ..." becomes its values, "err ..." an error naming the command, and
    /// an answer cut short an error too.
    #[test]
    fn calls_and_answers() {
        let answers = b"ok qpn=17 gid=00000000000000000000ffff0a000001\nerr bind MW MR OFF LEN ACCESS\nok".to_vec();
        let conn = Box::new(Scripted { answers: Mutex::new(answers), sent: Mutex::new(Vec::new()) });
        let mut a = VerbsAgent::new(conn);
        let r = a.call("open").unwrap();
        assert_eq!((num(&r, "qpn").unwrap(), r["gid"].as_str()), (17, "00000000000000000000ffff0a000001"));
        assert!(num(&r, "rkey").is_err());
        let e = a.call("bind 9 0 0 4096 wr").unwrap_err().to_string();
        assert!(e.contains("bind 9 0 0 4096 wr") && e.contains("err bind MW"), "{e}");
        assert!(a.call("quit").is_err(), "no end of line");
        assert_eq!(a.log, ["open -> ok qpn=17 gid=00000000000000000000ffff0a000001", "bind 9 0 0 4096 wr -> err bind MW MR OFF LEN ACCESS"]);
    }
}
