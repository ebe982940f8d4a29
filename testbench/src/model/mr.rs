//! Protection domains and memory regions. Keys are `pool index << 8 | 8-bit tag` and lkey = rkey, as rxe
//! `rxe_mr_init` makes them; the tag comes from the device's seeded generator.

use std::collections::BTreeMap;

use super::verbs::VerbsError;

pub use rnic_driver::verbs::{AccessFlags, Pd};

/// Whether the MR can be invalidated remotely (SEND_WITH_INV). rxe `rxe_invalidate_mr` only invalidates
/// fast-registration MRs (`IB_MR_TYPE_MEM_REG`); a user MR from `reg_mr` makes the invalidate fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrKind {
    User,
    FastReg,
    /// A memory window of type 1 (`ibv_alloc_mw`, bound by `ibv_bind_mw`): its own range, rights and PD over
    /// an MR's memory; an rkey only (as an lkey it is no key); unbound it is not valid.
    Window,
    /// A memory window of type 2 (bound by a BIND_MW send WQE): usable only through the QP that bound it,
    /// invalidated by LOCAL_INV and SEND_WITH_INV; unbound (free) it is not valid.
    Window2,
}

/// A registered memory region as returned to the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    pub pd: Pd,
    pub addr: u64,
    pub length: u64,
    pub lkey: u32,
    pub rkey: u32,
    pub access: AccessFlags,
}

#[derive(Clone, Debug)]
pub(crate) struct MrEntry {
    pub mr: Mr,
    pub kind: MrKind,
    pub valid: bool,
    /// A window: the key of the MR it is bound to; a type 2 window: the QP that bound it.
    pub bound_to: Option<u32>,
    pub bound_qp: Option<u32>,
}

/// Why a key check failed (all map to a protection or remote access error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    NoSuchKey,
    Invalid,
    WrongPd,
    Access,
    Bounds,
}

/// The MR table (the RTL's Key Cache).
#[derive(Clone, Debug, Default)]
pub struct MrTable {
    entries: BTreeMap<u32, MrEntry>,
    next_index: u32,
}

impl MrTable {
    pub(crate) fn insert(&mut self, pd: Pd, addr: u64, length: u64, access: AccessFlags, kind: MrKind, tag: u8) -> Mr {
        self.next_index += 1;
        let key = self.next_index << 8 | u32::from(tag);
        let mr = Mr {
            pd,
            addr,
            length,
            lkey: key,
            rkey: key,
            access,
        };
        self.entries.insert(self.next_index, MrEntry { mr, kind, valid: !matches!(kind, MrKind::Window | MrKind::Window2), bound_to: None, bound_qp: None });
        mr
    }

    /// The MR has windows bound to it.
    pub(crate) fn has_windows(&self, key: u32) -> bool {
        self.entries.values().any(|e| e.bound_to == Some(key))
    }

    pub(crate) fn remove(&mut self, key: u32) -> Result<Mr, VerbsError> {
        match self.entries.get(&(key >> 8)) {
            Some(e) if e.mr.lkey == key => Ok(self.entries.remove(&(key >> 8)).expect("present").mr),
            _ => Err(VerbsError::NoSuchMr(key)),
        }
    }

    pub(crate) fn get(&self, key: u32) -> Option<&MrEntry> {
        self.entries.get(&(key >> 8)).filter(|e| e.mr.lkey == key)
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> Option<&mut MrEntry> {
        self.entries.get_mut(&(key >> 8)).filter(|e| e.mr.lkey == key)
    }

    /// Invalidate `key` for a QP of `pd` (a received SEND_WITH_INV, a LOCAL_INV WQE): rxe `rxe_invalidate_mr`
    /// takes only a fast-registration MR whose key matches (index and tag); the PD must also be the QP's (a
    /// check this model and the RTL add, rxe 6.1 does not make it). An MR already invalid may be invalidated
    /// again. False: nothing changed.
    pub(crate) fn invalidate(&mut self, key: u32, pd: Pd) -> bool {
        match self.get_mut(key) {
            Some(e) if matches!(e.kind, MrKind::FastReg | MrKind::Window2) && e.mr.pd == pd => {
                e.valid = false;
                true
            }
            _ => false,
        }
    }

    /// An R_Key check for QP `qpn`: [`MrTable::check`], and a type 2 window answers only the QP that bound it
    /// (rxe `rxe_lookup_mw`: `mw->qp != qp`).
    pub fn check_rkey(&self, key: u32, pd: Pd, qpn: u32, addr: u64, len: u64, need: AccessFlags) -> Result<Mr, KeyError> {
        if self.get(key).map_or(false, |e| e.kind == MrKind::Window2 && e.bound_qp != Some(qpn)) {
            return Err(KeyError::NoSuchKey);
        }
        self.check(key, pd, addr, len, need)
    }

    /// The entry at a key's index whatever its tag (a type 2 window's bind names its next key).
    pub(crate) fn at_index_mut(&mut self, key: u32) -> Option<&mut MrEntry> {
        self.entries.get_mut(&(key >> 8))
    }

    /// Check a key for an access of `len` bytes at `addr` (rxe `lookup_mr` + `mr_check_range`).
    pub fn check(&self, key: u32, pd: Pd, addr: u64, len: u64, need: AccessFlags) -> Result<Mr, KeyError> {
        let e = self.get(key).ok_or(KeyError::NoSuchKey)?;
        if matches!(e.kind, MrKind::Window | MrKind::Window2) && need.0 & AccessFlags::REMOTE.0 == 0 {
            // a window's key is an rkey only: rxe looks an lkey up in its MR pool, where no window is
            return Err(KeyError::NoSuchKey);
        }
        if !e.valid {
            return Err(KeyError::Invalid);
        }
        if e.mr.pd != pd {
            return Err(KeyError::WrongPd);
        }
        if !e.mr.access.contains(need) {
            return Err(KeyError::Access);
        }
        let end = addr.checked_add(len).ok_or(KeyError::Bounds)?;
        if addr < e.mr.addr || end > e.mr.addr + e.mr.length {
            return Err(KeyError::Bounds);
        }
        Ok(e.mr)
    }
}
