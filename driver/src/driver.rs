//! The RNIC's driver: the model's verbs API (`reg_mr`, `create_cq`, `create_qp`, `modify_qp`, `post_send`,
//! `post_recv`, `poll_cq`) spoken only through the host interface of `docs/host-interface.md`: 32-bit register
//! reads and writes ([`CsrBus`]) and rings in host memory.
//!
//! Two traits stand between the driver and the device, each with a simulated and a card implementation:
//! the register bus ([`CsrBus`]: the simulator's AXI4-Lite ports, or the card's BAR through VFIO,
//! [`crate::vfio::VfioBar`]) and the DMA memory ([`DmaMemory`]: the simulator's host memory shared with its DMA
//! model, or pinned memory mapped through the IOMMU, [`crate::vfio::VfioDma`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use thiserror::Error;

use crate::host::*;
use crate::memory::{DmaMemory, HostMemory};
use crate::verbs::{AccessFlags, MacAddr, Pd, QpState, QpType};
use crate::verbs::{
    Cq, QpAttr, QpInitAttr, RecvWr, SendWr, Sge, VerbsError, WcFlags, WorkCompletion, WrOpcode,
};

/// 32-bit register access to the RNIC (AXI4-Lite in simulation, a BAR over PCIe).
pub trait CsrBus {
    fn write32(&mut self, addr: u32, value: u32) -> Result<(), DriverError>;
    fn read32(&mut self, addr: u32) -> Result<u32, DriverError>;
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DriverError {
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The bus answered SLVERR/DECERR or did not answer.
    #[error("register bus: {0}")]
    Bus(String),
    #[error("not an RNIC: ID register reads 0x{0:08x}")]
    NotAnRnic(u32),
    #[error("table command op {op} index {index} failed with error {err}")]
    Command { op: u8, index: u32, err: u8 },
    #[error("table command op {op} index {index} still busy after {polls} polls")]
    CommandTimeout { op: u8, index: u32, polls: u32 },
    #[error("the device lacks capability 0x{0:x}")]
    Unsupported(u32),
    #[error("CQE with unknown status {status} or opcode {opcode}")]
    BadCqe { status: u8, opcode: u8 },
    #[error("no ARP answer from {ip} to {tries} requests (is the peer up, on this link, with this address?)")]
    Unreachable { ip: std::net::Ipv4Addr, tries: u32 },
}

/// ARP requests sent for one address before [`Driver::resolve`] gives up.
pub const ARP_TRIES: u32 = 3;
/// Polls of `ARP_MAC_HI` per request (with the caller's pause between them: 1 ms on the card).
pub const ARP_POLLS: u32 = 300;
/// How long a resolved neighbour is trusted before it is asked again (Linux ages a reachable entry after
/// 15 to 45 s; a stale one is re-verified on its next use, as here).
pub const NEIGH_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// A neighbour cache: IPv4 address to MAC, each entry with the time it was learned.
#[derive(Clone, Debug, Default)]
pub struct Neighbours {
    map: HashMap<std::net::Ipv4Addr, (MacAddr, std::time::Instant)>,
}

impl Neighbours {
    /// The MAC of `ip`, if learned less than [`NEIGH_TTL`] before `now`.
    pub fn get(&self, ip: std::net::Ipv4Addr, now: std::time::Instant) -> Option<MacAddr> {
        self.map.get(&ip).filter(|(_, t)| now.saturating_duration_since(*t) < NEIGH_TTL).map(|(m, _)| *m)
    }
    pub fn put(&mut self, ip: std::net::Ipv4Addr, mac: MacAddr, now: std::time::Instant) {
        self.map.insert(ip, (mac, now));
    }
}

/// ARP resolution by the RNIC's registers, whoever makes the accesses: `query` writes `ARP_QUERY`, `answer`
/// reads the answer; up to [`ARP_TRIES`] requests of [`ARP_POLLS`] polls each, `pause` between polls.
pub fn resolve_by(
    ip: std::net::Ipv4Addr,
    query: &mut dyn FnMut(std::net::Ipv4Addr) -> Result<(), DriverError>,
    answer: &mut dyn FnMut() -> Result<Option<MacAddr>, DriverError>,
    pause: &mut dyn FnMut(),
) -> Result<MacAddr, DriverError> {
    for _ in 0..ARP_TRIES {
        query(ip)?;
        for _ in 0..ARP_POLLS {
            if let Some(m) = answer()? {
                return Ok(m);
            }
            pause();
        }
    }
    Err(DriverError::Unreachable { ip, tries: ARP_TRIES })
}

/// What the device reported at open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub version: u32,
    pub caps: u32,
    pub log2_qps: u8,
    pub log2_mrs: u8,
    pub log2_cqs: u8,
    pub max_mtu_code: u8,
}

struct Ring {
    base: u64,
    log2: u8,
    /// Producer (SQ/RQ) or consumer (CQ) index, free-running mod 2^16.
    idx: u16,
    /// Slots the device has not completed yet (SQ/RQ).
    outstanding: u32,
}

impl Ring {
    fn entries(&self) -> u32 {
        1 << self.log2
    }
}

struct QpState_ {
    send_cq: Cq,
    recv_cq: Cq,
    sq: Ring,
    rq: Ring,
    cmd: QpCmd,
    state: QpState,
    sq_sig_all: bool,
    /// Posted send WQEs not completed yet, oldest first: (slots, signaled). Send completions arrive in
    /// order, and a signaled WQE's CQE also retires the unsignaled WQEs before it (IBA).
    sq_posted: VecDeque<(u16, bool)>,
}

/// The host side of one RNIC.
pub struct Driver<B: CsrBus, M: DmaMemory = HostMemory> {
    bus: B,
    mem: Arc<Mutex<M>>,
    pub info: DeviceInfo,
    pds: u32,
    next_mr_index: u32,
    mr_tag: u8,
    mrs: HashMap<u32, MrCmd>,
    /// Memory windows by Key Cache index: PD, rkey at allocation or its last bind by the driver, and the MR a
    /// type 1 window is bound to (a type 2 window's binds are the RNIC's: not known here).
    mws: HashMap<u32, (Pd, u32, Option<u32>)>,
    /// Our IPv6 address (`set_ipv6`): an IPv6 path or address handle needs one.
    ipv6: Option<std::net::Ipv6Addr>,
    cqs: Vec<(Ring, bool)>,
    qps: HashMap<u32, QpState_>,
    next_qpn: u32,
    /// QP1 has been created.
    gsi: bool,
    /// Polls of CMD_STATUS before a command counts as hung.
    pub command_polls: u32,
    neighbours: Neighbours,
}

/// IB MTU code (`enum ibv_mtu`) of a path MTU in bytes.
pub fn mtu_code(bytes: u32) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

fn log2_ceil(n: u32) -> u8 {
    (32 - n.max(2).saturating_sub(1).leading_zeros()) as u8
}

impl<B: CsrBus, M: DmaMemory> Driver<B, M> {
    /// Open the device: check `ID`, read `CAPS` and `SIZES`.
    pub fn open(mut bus: B, mem: Arc<Mutex<M>>) -> Result<Self, DriverError> {
        let id = bus.read32(REG_ID)?;
        if id != ID_VALUE {
            return Err(DriverError::NotAnRnic(id));
        }
        let version = bus.read32(REG_VERSION)?;
        let caps = bus.read32(REG_CAPS)?;
        let s = bus.read32(REG_SIZES)?;
        let info = DeviceInfo {
            version,
            caps,
            log2_qps: s as u8,
            log2_mrs: (s >> 8) as u8,
            log2_cqs: (s >> 16) as u8,
            max_mtu_code: (s >> 24) as u8,
        };
        Ok(Driver {
            bus,
            mem,
            info,
            pds: 0,
            next_mr_index: 1,
            mr_tag: 0x5A,
            mrs: HashMap::new(),
            mws: HashMap::new(),
            ipv6: None,
            cqs: Vec::new(),
            qps: HashMap::new(),
            // rxe numbers user QPs from 0x11; QPN 0 and 1 are the special QPs
            next_qpn: 0x11,
            gsi: false,
            command_polls: 10_000,
            neighbours: Neighbours::default(),
        })
    }

    pub fn bus(&mut self) -> &mut B {
        &mut self.bus
    }

    /// Send WQEs posted and not yet retired by a polled completion, over every QP. While it is not zero the
    /// device may have a retransmit timer running (a simulation must keep its clock going).
    pub fn send_outstanding(&self) -> u32 {
        self.qps.values().map(|q| q.sq.outstanding).sum()
    }

    pub fn memory(&self) -> Arc<Mutex<M>> {
        self.mem.clone()
    }

    /// Our MAC and IPv4 address.
    pub fn set_address(&mut self, mac: [u8; 6], ipv4: u32) -> Result<(), DriverError> {
        self.bus.write32(REG_MAC_LO, u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]))?;
        self.bus.write32(REG_MAC_HI, u32::from(u16::from_be_bytes([mac[0], mac[1]])))?;
        self.bus.write32(REG_IPV4, ipv4)
    }

    /// Our IPv6 address (`CMD_SET_IPV6`), or `None`: RoCEv2 over IPv6 off, IPv6 frames dropped.
    pub fn set_ipv6(&mut self, ip: Option<std::net::Ipv6Addr>) -> Result<(), DriverError> {
        let mut data = [0u32; CMD_DATA_WORDS];
        data[..4].copy_from_slice(&u128_words(ip.map_or(0, u128::from)));
        self.command(&Command { op: CMD_SET_IPV6, index: 0, data })?;
        self.ipv6 = ip;
        Ok(())
    }

    /// The port's VLAN (`CMD_SET_VLAN`): `Some(tci)` (PCP 15:13, DEI 12, VID 11:0, VID 1..=4094) puts it on
    /// the VLAN, `None` takes it off.
    pub fn set_vlan(&mut self, tci: Option<u16>) -> Result<(), DriverError> {
        if let Some(t) = tci {
            if matches!(t & 0xFFF, 0 | 0xFFF) {
                return Err(VerbsError::InvalidArgument("VLAN ID 0 and 4095 are reserved (802.1Q)").into());
            }
        }
        let mut data = [0u32; CMD_DATA_WORDS];
        data[0] = tci.map_or(0, |t| 1 << 31 | u32::from(t));
        self.command(&Command { op: CMD_SET_VLAN, index: 0, data })
    }

    /// An address vector's destination as the RNIC takes it: IPv4 (also from an IPv4-mapped GID), or IPv6,
    /// which needs our IPv6 address (else the RNIC would send from ::).
    fn path_ip(ours6: Option<std::net::Ipv6Addr>, ip: std::net::IpAddr) -> Result<std::net::IpAddr, DriverError> {
        match ip {
            std::net::IpAddr::V6(a) if a.to_ipv4_mapped().is_none() && ours6.is_none() => {
                Err(VerbsError::InvalidArgument("IPv6 address vector, but no IPv6 address of ours (set_ipv6)").into())
            }
            std::net::IpAddr::V6(a) => Ok(a.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4)),
            v4 => Ok(v4),
        }
    }

    /// Send an ARP request for `ip` (`ARP_QUERY`); the answer comes to [`Driver::arp_answer`].
    pub fn arp_query(&mut self, ip: std::net::Ipv4Addr) -> Result<(), DriverError> {
        self.bus.write32(REG_ARP_QUERY, u32::from(ip))
    }

    /// The MAC the last query was answered with, once it has come.
    pub fn arp_answer(&mut self) -> Result<Option<MacAddr>, DriverError> {
        let hi = self.bus.read32(REG_ARP_MAC_HI)?;
        if hi & ARP_VALID == 0 {
            return Ok(None);
        }
        let lo = self.bus.read32(REG_ARP_MAC_LO)?.to_be_bytes();
        let h = (hi as u16).to_be_bytes();
        Ok(Some(MacAddr([h[0], h[1], lo[0], lo[1], lo[2], lo[3]])))
    }

    /// The MAC of the neighbour `ip`: from the cache, or asked on the wire by the RNIC (ARP, see
    /// [`resolve_by`]), `pause` between polls of the answer.
    pub fn resolve(&mut self, ip: std::net::Ipv4Addr, pause: &mut dyn FnMut()) -> Result<MacAddr, DriverError> {
        let now = std::time::Instant::now();
        if let Some(m) = self.neighbours.get(ip, now) {
            return Ok(m);
        }
        let me = std::cell::RefCell::new(&mut *self);
        let m = resolve_by(ip, &mut |ip| me.borrow_mut().arp_query(ip), &mut || me.borrow_mut().arp_answer(), pause)?;
        self.neighbours.put(ip, m, std::time::Instant::now());
        Ok(m)
    }

    /// One table command: stage, start, wait.
    pub fn command(&mut self, c: &Command) -> Result<(), DriverError> {
        for (i, w) in c.data.iter().enumerate() {
            self.bus.write32(REG_CMD_DATA + 4 * i as u32, *w)?;
        }
        let before = self.bus.read32(REG_CMD_STATUS)? >> 16;
        self.bus.write32(REG_CMD, c.cmd_word())?;
        for _ in 0..self.command_polls {
            let s = self.bus.read32(REG_CMD_STATUS)?;
            if s & 1 == 0 && (s >> 16) != before {
                let err = (s >> 8) as u8;
                return if err == CMD_ERR_NONE {
                    Ok(())
                } else {
                    Err(DriverError::Command { op: c.op, index: c.index, err })
                };
            }
        }
        Err(DriverError::CommandTimeout { op: c.op, index: c.index, polls: self.command_polls })
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> Pd {
        self.pds += 1;
        Pd(self.pds)
    }

    /// `ibv_reg_mr` over host memory the caller allocated; returns the key (lkey = rkey).
    pub fn reg_mr(&mut self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<u32, DriverError> {
        self.reg_mr_kind(pd, addr, len, access, false)
    }

    /// A fast-registration MR (the kernel's `ib_alloc_mr` + `IB_WR_REG_MR` in one step, rxe's
    /// `IB_MR_TYPE_MEM_REG`): the only kind a received SEND_WITH_INV may invalidate.
    pub fn reg_mr_fast(&mut self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<u32, DriverError> {
        self.reg_mr_kind(pd, addr, len, access, true)
    }

    fn reg_mr_kind(&mut self, pd: Pd, addr: u64, len: u64, access: AccessFlags, fast: bool) -> Result<u32, DriverError> {
        if pd.0 == 0 || pd.0 > self.pds {
            return Err(VerbsError::NoSuchPd.into());
        }
        if len > 0 && !self.mem.lock().unwrap().contains(addr, len) {
            return Err(VerbsError::BadAddress { addr, len }.into());
        }
        if (access.contains(AccessFlags::REMOTE_WRITE) || access.contains(AccessFlags::REMOTE_ATOMIC))
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(VerbsError::InvalidArgument("REMOTE_WRITE/ATOMIC need LOCAL_WRITE").into());
        }
        let index = self.free_key_index()?;
        self.mr_tag = self.mr_tag.wrapping_mul(5).wrapping_add(17);
        let m = MrCmd { va: addr, len, dma_base: addr, key: index << 8 | u32::from(self.mr_tag), pd: pd.0, access: access.0 as u8, fast, mw: false, mw2: false, unbound: false };
        self.command(&m.command())?;
        self.mrs.insert(m.key, m);
        Ok(m.key)
    }

    /// A Key Cache index no MR or window holds (MRs and windows share the table and its key space).
    fn free_key_index(&mut self) -> Result<u32, DriverError> {
        let slots = 1u32 << self.info.log2_mrs;
        let index = (0..slots)
            .map(|k| (self.next_mr_index + k) % slots)
            .find(|&i| i != 0 && !self.mrs.values().any(|m| m.key >> 8 == i) && !self.mws.contains_key(&i))
            .ok_or(VerbsError::QueueFull)?;
        self.next_mr_index = index + 1;
        Ok(index)
    }

    /// `ibv_dereg_mr`. An MR with windows bound to it is refused (rxe `rxe_dereg_mr`: `num_mw`).
    pub fn dereg_mr(&mut self, key: u32) -> Result<(), DriverError> {
        if !self.mrs.contains_key(&key) {
            return Err(VerbsError::NoSuchMr(key).into());
        }
        if self.mws.values().any(|w| w.2 == Some(key)) {
            return Err(VerbsError::InvalidArgument("the MR has memory windows bound to it").into());
        }
        self.mrs.remove(&key);
        let c = Command { op: CMD_INVALIDATE_MR, index: key >> 8, data: [0; CMD_DATA_WORDS] };
        self.command(&c)
    }

    /// A window's Key Cache index and first rkey, for PD `pd`, recorded as unbound.
    fn new_window(&mut self, pd: Pd) -> Result<(u32, u32), DriverError> {
        if pd.0 == 0 || pd.0 > self.pds {
            return Err(VerbsError::NoSuchPd.into());
        }
        let index = self.free_key_index()?;
        self.mr_tag = self.mr_tag.wrapping_mul(5).wrapping_add(17);
        let key = index << 8 | u32::from(self.mr_tag);
        self.mws.insert(index, (pd, key, None));
        Ok((index, key))
    }

    /// `ibv_alloc_mw` of type 1: a Key Cache entry of PD `pd`, unbound (no access through its rkey); returns
    /// that rkey. Type 2: [`Driver::alloc_mw2`].
    pub fn alloc_mw(&mut self, pd: Pd) -> Result<u32, DriverError> {
        let (index, key) = self.new_window(pd)?;
        self.command(&Command { op: CMD_INVALIDATE_MR, index, data: [0; CMD_DATA_WORDS] })?;
        Ok(key)
    }

    /// `ibv_bind_mw` of the type 1 window `mw` (its current rkey) on QP `qpn`: `len` bytes at `addr` of the MR
    /// `mr` with the remote rights `access` (its local bits are ignored); `len` 0 unbinds it. Done at once by a
    /// Key Cache write (both copies), not as a send WQE, and no completion is made. Returns the window's new
    /// rkey (the key's low byte + 1, `ibv_inc_rkey`); the old one no longer works. The rules, as rxe
    /// `rxe_check_bind_mw` and the IBA (C10-72..75): the QP, the window and the MR in one PD; the MR has
    /// `MW_BIND`; REMOTE_WRITE or REMOTE_ATOMIC need the MR's LOCAL_WRITE; the window lies inside the MR.
    pub fn bind_mw(&mut self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32, DriverError> {
        let index = mw >> 8;
        let (pd, key, _) = *self.mws.get(&index).filter(|w| w.1 == mw).ok_or(VerbsError::NoSuchMr(mw))?;
        let qp_pd = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?.cmd.pd;
        if qp_pd != pd.0 {
            return Err(VerbsError::InvalidArgument("the QP and the window are in different PDs").into());
        }
        let new_key = crate::verbs::inc_rkey(key);
        if len == 0 {
            self.command(&Command { op: CMD_INVALIDATE_MR, index, data: [0; CMD_DATA_WORDS] })?;
            self.mws.insert(index, (pd, new_key, None));
            return Ok(new_key);
        }
        let m = *self.mrs.get(&mr).ok_or(VerbsError::NoSuchMr(mr))?;
        let macc = AccessFlags(u32::from(m.access));
        if m.pd != pd.0 {
            return Err(VerbsError::InvalidArgument("the MR and the window are in different PDs").into());
        }
        if !macc.contains(AccessFlags::MW_BIND) {
            return Err(VerbsError::InvalidArgument("the MR was registered without MW_BIND").into());
        }
        if (access.contains(AccessFlags::REMOTE_WRITE) || access.contains(AccessFlags::REMOTE_ATOMIC)) && !macc.contains(AccessFlags::LOCAL_WRITE) {
            return Err(VerbsError::InvalidArgument("REMOTE_WRITE/ATOMIC through a window need the MR's LOCAL_WRITE").into());
        }
        if addr < m.va || addr.checked_add(len).map_or(true, |e| e > m.va + m.len) {
            return Err(VerbsError::InvalidArgument("the window does not lie inside the MR").into());
        }
        let remote = access.0 & AccessFlags::REMOTE.0;
        let w = MrCmd { va: addr, len, dma_base: m.dma_base + (addr - m.va), key: new_key, pd: pd.0, access: remote as u8, fast: false, mw: true, mw2: false, unbound: false };
        self.command(&w.command())?;
        self.mws.insert(index, (pd, new_key, Some(mr)));
        Ok(new_key)
    }

    /// `ibv_alloc_mw` of type 2: a Key Cache entry of PD `pd` written unbound (not valid, a type 2 window, one
    /// that LOCAL_INV and SEND_WITH_INV may invalidate); returns its rkey. A BIND_MW send WQE binds it with the
    /// next rkey (`ibv_inc_rkey`); the RNIC checks the rules there.
    pub fn alloc_mw2(&mut self, pd: Pd) -> Result<u32, DriverError> {
        let (_, key) = self.new_window(pd)?;
        let w = MrCmd { va: 0, len: 0, dma_base: 0, key, pd: pd.0, access: 0, fast: true, mw: true, mw2: true, unbound: true };
        self.command(&w.command())?;
        Ok(key)
    }

    /// `ibv_dealloc_mw`: the window's entry invalidated and freed.
    pub fn dealloc_mw(&mut self, mw: u32) -> Result<(), DriverError> {
        // (by index: a type 2 window's key changes with each bind, made by the RNIC)
        let index = mw >> 8;
        self.mws.get(&index).ok_or(VerbsError::NoSuchMr(mw))?;
        // a plain entry, not valid and no window (a type 2 window left free could still be bound)
        let gone = MrCmd { va: 0, len: 0, dma_base: 0, key: index << 8, pd: 0, access: 0, fast: false, mw: false, mw2: false, unbound: true };
        self.command(&gone.command())?;
        self.mws.remove(&index);
        Ok(())
    }

    fn alloc_ring(&mut self, log2: u8, entry: usize) -> Result<u64, DriverError> {
        let bytes = (1usize << log2) * entry;
        // DMA memory allocations are page aligned, so rings are 64-byte aligned
        Ok(self.mem.lock().unwrap().alloc(bytes)?)
    }

    /// `ibv_create_cq` with room for at least `cqe` entries.
    pub fn create_cq(&mut self, cqe: u32) -> Result<Cq, DriverError> {
        let cqn = self.cqs.len() as u32;
        if cqn >= 1 << self.info.log2_cqs {
            return Err(VerbsError::QueueFull.into());
        }
        let log2 = log2_ceil(cqe.max(2)).min(16);
        let base = self.alloc_ring(log2, CQE_BYTES)?;
        self.command(&RingCmd { base, log2_entries: log2, cqn: 0 }.command(CMD_WRITE_CQ, cqn))?;
        self.cqs.push((Ring { base, log2, idx: 0, outstanding: 0 }, true));
        Ok(Cq(cqn))
    }

    /// The QPN the next QP gets (then the ones above it), 0x11 after `open` as in rxe. QPNs 0 and 1 are the
    /// special QPs and are not given this way.
    pub fn set_next_qpn(&mut self, qpn: u32) {
        self.next_qpn = qpn.max(2);
    }

    /// `ibv_create_qp`: rings of at least `cap.max_send_wr` / `max_recv_wr` slots.
    pub fn create_qp(&mut self, pd: Pd, init: QpInitAttr) -> Result<u32, DriverError> {
        self.create_qp_as(pd, init, None)
    }

    /// The GSI QP, QP1 (`IB_QPT_GSI`, what the kernel's MAD layer creates): a UD QP whose Q_Key is the GSI
    /// Q_Key 0x80010000, received with it whatever `modify_qp` says, and sent with it (its UD WQEs' remote
    /// Q_Key is the GSI one, as rxe's QP1 sends it). Once per device.
    pub fn create_gsi_qp(&mut self, pd: Pd, init: QpInitAttr) -> Result<u32, DriverError> {
        if self.gsi {
            return Err(VerbsError::InvalidArgument("QP1 exists").into());
        }
        let qpn = self.create_qp_as(pd, QpInitAttr { qp_type: QpType::Ud, ..init }, Some(1))?;
        self.gsi = true;
        Ok(qpn)
    }

    fn create_qp_as(&mut self, pd: Pd, init: QpInitAttr, fixed: Option<u32>) -> Result<u32, DriverError> {
        if pd.0 == 0 || pd.0 > self.pds {
            return Err(VerbsError::NoSuchPd.into());
        }
        for cq in [init.send_cq, init.recv_cq] {
            if cq.0 as usize >= self.cqs.len() {
                return Err(VerbsError::NoSuchCq.into());
            }
        }
        let cap = match init.qp_type {
            QpType::Rc => CAP_RC,
            QpType::Uc => CAP_UC,
            QpType::Ud => CAP_UD,
        };
        if self.info.caps & cap == 0 {
            return Err(DriverError::Unsupported(cap));
        }
        let qpn = fixed.unwrap_or(self.next_qpn);
        if qpn >= 1 << self.info.log2_qps {
            return Err(VerbsError::QueueFull.into());
        }
        if fixed.is_none() {
            self.next_qpn += 1;
        }
        let slog2 = log2_ceil(init.cap.max_send_wr.max(1) * 2).min(15);
        let rlog2 = log2_ceil(init.cap.max_recv_wr.max(1)).min(15);
        let sbase = self.alloc_ring(slog2, WQE_BYTES)?;
        let rbase = self.alloc_ring(rlog2, WQE_BYTES)?;
        self.command(&RingCmd { base: sbase, log2_entries: slog2, cqn: init.send_cq.0 }.command(CMD_WRITE_SQ, qpn))?;
        self.command(&RingCmd { base: rbase, log2_entries: rlog2, cqn: init.recv_cq.0 }.command(CMD_WRITE_RQ, qpn))?;
        let ud = init.qp_type == QpType::Ud;
        let cmd = QpCmd {
            state: QpState::Reset as u8,
            qp_type: init.qp_type as u8,
            pd: pd.0,
            send_cq: init.send_cq.0,
            recv_cq: init.recv_cq.0,
            // UD: messages are cut at the port's MTU (rxe: the port's active MTU) unless modify_qp names one,
            // and its packets leave from the QP's own UDP source port unless the WR's address vector names one
            path_mtu: if ud { self.info.max_mtu_code } else { 0 },
            sport: if ud { 0xC000 | (qpn as u16 & 0x3FFF) } else { 0 },
            // (QP1's Q_Key is the GSI one from the start; modify_qp keeps it so)
            qkey: if qpn == 1 { GSI_QKEY } else { 0 },
            ..Default::default()
        };
        self.command(&cmd.command(qpn))?;
        self.qps.insert(
            qpn,
            QpState_ {
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                sq: Ring { base: sbase, log2: slog2, idx: 0, outstanding: 0 },
                rq: Ring { base: rbase, log2: rlog2, idx: 0, outstanding: 0 },
                cmd,
                state: QpState::Reset,
                sq_sig_all: init.sq_sig_all,
                sq_posted: VecDeque::new(),
            },
        );
        Ok(qpn)
    }

    /// `ibv_modify_qp`: every `Some` attribute is applied; the QP's static word is rewritten whole, the PSNs
    /// with their own commands.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr) -> Result<(), DriverError> {
        let ours6 = self.ipv6;
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let c = &mut qp.cmd;
        if let Some(s) = attr.qp_state {
            c.state = s as u8;
        }
        if let Some(m) = attr.path_mtu {
            c.path_mtu = mtu_code(m).ok_or(VerbsError::InvalidArgument("path_mtu"))?;
        }
        if let Some(d) = attr.dest_qp_num {
            c.dest_qpn = d & 0xFF_FFFF;
        }
        if let Some(v) = attr.max_rd_atomic {
            c.max_rd_atomic = v;
        }
        if let Some(v) = attr.max_dest_rd_atomic {
            c.max_dest_rd_atomic = v;
        }
        if let Some(v) = attr.min_rnr_timer {
            c.min_rnr_timer = v & 31;
        }
        if let Some(v) = attr.timeout {
            c.timeout = v & 31;
        }
        if let Some(v) = attr.retry_cnt {
            c.retry_cnt = v.min(7);
        }
        if let Some(v) = attr.rnr_retry {
            c.rnr_retry = v.min(7);
        }
        if let Some(a) = attr.qp_access_flags {
            c.access = a.0 as u8;
        }
        if let Some(av) = attr.av {
            c.remote_mac = av.dmac.0;
            // (an IPv4-mapped GID is the IPv4 address)
            match Self::path_ip(ours6, av.dip)? {
                std::net::IpAddr::V4(a) => (c.remote_ip, c.ipv6, c.remote_ip6) = (u32::from(a), false, 0),
                std::net::IpAddr::V6(a) => (c.remote_ip, c.ipv6, c.remote_ip6) = (0, true, u128::from(a)),
            }
            c.sport = av.sport.unwrap_or(0xC000 | (qpn as u16 & 0x3FFF));
        }
        if let Some(k) = attr.qkey {
            c.qkey = k;
        }
        if qpn == 1 {
            // QP1's Q_Key is the GSI one, whatever is asked
            c.qkey = GSI_QKEY;
        }
        let cmd = c.command(qpn);
        if let Some(s) = attr.qp_state {
            qp.state = s;
        }
        self.command(&cmd)?;
        if let Some(p) = attr.rq_psn {
            self.command(&psn_command(CMD_WRITE_QP_RESP, qpn, p))?;
        }
        if let Some(p) = attr.sq_psn {
            self.command(&psn_command(CMD_WRITE_QP_REQ, qpn, p))?;
        }
        Ok(())
    }

    /// `ibv_post_send`: write the WQE (and its mask or inline slots) into the ring, then ring the doorbell.
    pub fn post_send(&mut self, qpn: u32, wr: &SendWr) -> Result<(), DriverError> {
        let ours6 = self.ipv6;
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if !matches!(qp.state, QpState::Rts | QpState::Sqd) {
            return Err(VerbsError::NotSupported("post_send needs RTS").into());
        }
        if wr.sg_list.len() > 1 {
            return Err(VerbsError::InvalidArgument("one SGE per WQE").into());
        }
        let masked = matches!(wr.opcode, WrOpcode::MaskedAtomicCmpAndSwp | WrOpcode::MaskedAtomicFetchAndAdd);
        if masked && self.info.caps & CAP_MASKED_ATOMIC == 0 {
            return Err(DriverError::Unsupported(CAP_MASKED_ATOMIC));
        }
        if wr.opcode.is_atomic() && !masked && self.info.caps & CAP_ATOMIC == 0 {
            return Err(DriverError::Unsupported(CAP_ATOMIC));
        }
        if wr.flags.inline && self.info.caps & CAP_INLINE == 0 {
            return Err(DriverError::Unsupported(CAP_INLINE));
        }
        let sge = wr.sg_list.first().copied().unwrap_or(Sge { addr: 0, length: 0, lkey: 0 });
        let mut flags = 0u8;
        if wr.flags.signaled || qp.sq_sig_all {
            flags |= WQE_SIGNALED;
        }
        if wr.flags.solicited {
            flags |= WQE_SOLICITED;
        }
        if wr.flags.fence {
            flags |= WQE_FENCE;
        }
        if masked {
            flags |= WQE_EXT;
        }
        let inline = wr.flags.inline;
        if inline {
            flags |= WQE_INLINE;
        }
        let w = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr_opcode_code(wr.opcode),
            flags,
            imm_or_inv: match wr.opcode {
                WrOpcode::SendWithInv | WrOpcode::LocalInv => wr.invalidate_rkey,
                // BIND_MW: the window's rights in the ImmDt's place
                WrOpcode::BindMw => wr.mw_access.0,
                _ => wr.imm_data,
            },
            local_addr: sge.addr,
            length: if inline { wr.inline_data.len() as u32 } else { sge.length },
            lkey: sge.lkey,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            compare_add: wr.compare_add,
            swap: wr.swap,
        };
        if inline && wr.inline_data.len() > MAX_INLINE {
            return Err(VerbsError::InvalidArgument("inline data longer than MAX_INLINE").into());
        }
        if inline && !wr.opcode.may_be_inline() {
            return Err(VerbsError::InvalidArgument("inline on an opcode without payload to send").into());
        }
        let mut slots: Vec<[u8; WQE_BYTES]> = Vec::new();
        if inline {
            // the WQE and its data slots inside one aligned group of the ring: the RNIC reads them together
            let n = w.slots();
            let pad = group_pad(qp.sq.idx, n, qp.sq.entries())
                .ok_or(VerbsError::InvalidArgument("inline WQE larger than the send ring's read group"))?;
            slots.extend(std::iter::repeat(nop_slot()).take(pad));
        }
        if masked {
            slots.push(mask_slot(wr.compare_add_mask, wr.swap_mask));
        }
        if qp.cmd.qp_type == QpType::Ud as u8 {
            // a UD WQE: SEND or SEND_WITH_IMM, the address handle in place of the remote address and operands
            if !matches!(wr.opcode, WrOpcode::Send | WrOpcode::SendWithImm) {
                return Err(VerbsError::NotSupported("UD has SEND only").into());
            }
            let Some(ud) = wr.ud else {
                return Err(VerbsError::InvalidArgument("UD WR needs a destination").into());
            };
            let ah = UdAh {
                remote_qpn: ud.remote_qpn,
                // (QP1 sends the GSI Q_Key, as rxe's QP1 does whatever the WR says)
                remote_qkey: if qpn == 1 { GSI_QKEY } else { ud.remote_qkey },
                dmac: ud.av.dmac.0,
                sport: ud.av.sport.unwrap_or(0),
                dgid: gid_of(Self::path_ip(ours6, ud.av.dip)?),
                traffic_class: ud.av.traffic_class,
                hop_limit: ud.av.hop_limit,
            };
            slots.push(ah.encode_with(&SendWqe { remote_addr: 0, rkey: 0, compare_add: 0, swap: 0, ..w }));
        } else {
            slots.push(w.encode());
        }
        if inline {
            for chunk in wr.inline_data.chunks(WQE_BYTES) {
                let mut b = [0u8; WQE_BYTES];
                b[..chunk.len()].copy_from_slice(chunk);
                slots.push(b);
            }
        }
        let n = slots.len() as u32;
        if qp.sq.outstanding + n > qp.sq.entries() {
            return Err(VerbsError::QueueFull.into());
        }
        {
            let mut mem = self.mem.lock().unwrap();
            for (k, s) in slots.iter().enumerate() {
                let i = qp.sq.idx.wrapping_add(k as u16);
                let slot = u64::from(i) & u64::from(qp.sq.entries() - 1);
                mem.write(qp.sq.base + slot * WQE_BYTES as u64, s)?;
            }
        }
        qp.sq_posted.push_back((n as u16, flags & WQE_SIGNALED != 0));
        qp.sq.idx = qp.sq.idx.wrapping_add(n as u16);
        qp.sq.outstanding += n;
        let pi = qp.sq.idx;
        self.bus.write32(sq_doorbell(qpn), u32::from(pi))
    }

    /// `ibv_post_recv`.
    pub fn post_recv(&mut self, qpn: u32, wr: &RecvWr) -> Result<(), DriverError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if matches!(qp.state, QpState::Reset | QpState::Error) {
            return Err(VerbsError::NotSupported("post_recv in RESET/ERROR").into());
        }
        if wr.sg_list.len() > 1 {
            return Err(VerbsError::InvalidArgument("one SGE per WQE").into());
        }
        if qp.rq.outstanding >= qp.rq.entries() {
            return Err(VerbsError::QueueFull.into());
        }
        let sge = wr.sg_list.first().copied().unwrap_or(Sge { addr: 0, length: 0, lkey: 0 });
        let w = RecvWqe { wr_id: wr.wr_id, addr: sge.addr, length: sge.length, lkey: sge.lkey };
        let slot = u64::from(qp.rq.idx) & u64::from(qp.rq.entries() - 1);
        self.mem.lock().unwrap().write(qp.rq.base + slot * WQE_BYTES as u64, &w.encode())?;
        qp.rq.idx = qp.rq.idx.wrapping_add(1);
        qp.rq.outstanding += 1;
        let pi = qp.rq.idx;
        self.bus.write32(rq_doorbell(qpn), u32::from(pi))
    }

    /// Where CQ `cq`'s ring lives in host memory: base address and size in bytes (for monitors in tests).
    pub fn cq_ring(&self, cq: Cq) -> Option<(u64, u64)> {
        self.cqs.get(cq.0 as usize).map(|(r, _)| (r.base, (CQE_BYTES as u64) << r.log2))
    }

    /// `ibv_poll_cq`: up to `max` new CQEs (by phase), oldest first; tells the device the new consumer index.
    pub fn poll_cq(&mut self, cq: Cq, max: usize) -> Result<Vec<WorkCompletion>, DriverError> {
        let (ring, _) = self.cqs.get(cq.0 as usize).ok_or(VerbsError::NoSuchCq)?;
        let (base, log2, mut idx) = (ring.base, ring.log2, ring.idx);
        let mut raw = Vec::new();
        {
            let mem = self.mem.lock().unwrap();
            while raw.len() < max {
                let entries = 1u32 << log2;
                let slot = u32::from(idx) & (entries - 1);
                // pass number of this index: phase 1 on even passes
                let pass_phase = (u32::from(idx) >> log2) & 1 == 0;
                let b: [u8; CQE_BYTES] =
                    mem.read(base + u64::from(slot) * CQE_BYTES as u64, CQE_BYTES)?.try_into().unwrap();
                let c = Cqe::decode(&b);
                if c.phase != pass_phase {
                    break;
                }
                raw.push(c);
                idx = idx.wrapping_add(1);
            }
        }
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        self.cqs[cq.0 as usize].0.idx = idx;
        self.bus.write32(cq_doorbell(cq.0), u32::from(idx))?;
        let mut out = Vec::with_capacity(raw.len());
        for c in raw {
            let wc = WorkCompletion {
                wr_id: c.wr_id,
                status: wc_status_of(c.status).ok_or(DriverError::BadCqe { status: c.status, opcode: c.opcode })?,
                opcode: wc_opcode_of(c.opcode).ok_or(DriverError::BadCqe { status: c.status, opcode: c.opcode })?,
                byte_len: c.byte_len,
                imm_data: if u32::from(c.wc_flags) & WcFlags::WITH_IMM != 0 { c.imm_or_inv } else { 0 },
                invalidated_rkey: if u32::from(c.wc_flags) & WcFlags::WITH_INV != 0 { c.imm_or_inv } else { 0 },
                qp_num: c.qp_num,
                src_qp: c.src_qp,
                wc_flags: WcFlags(u32::from(c.wc_flags)),
            };
            if let Some(qp) = self.qps.get_mut(&c.qp_num) {
                if wc.opcode as u8 >= crate::verbs::WcOpcode::Recv as u8 && qp.recv_cq == cq {
                    qp.rq.outstanding = qp.rq.outstanding.saturating_sub(1);
                } else if qp.send_cq == cq {
                    while let Some((n, signaled)) = qp.sq_posted.pop_front() {
                        qp.sq.outstanding = qp.sq.outstanding.saturating_sub(u32::from(n));
                        if signaled {
                            break;
                        }
                    }
                }
            }
            out.push(wc);
        }
        Ok(out)
    }
}
