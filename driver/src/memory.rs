//! The memory the RNIC reaches by DMA, behind one trait ([`DmaMemory`]) with two implementations: the
//! simulated host memory ([`HostMemory`], allocations addressed by a 64-bit VA, each a `Vec<u8>`, shared with
//! the simulator's DMA model) and, on the card, memory pinned and mapped through the IOMMU
//! ([`crate::vfio::VfioDma`]). Addresses are device addresses: what the driver writes into rings and MRs is
//! what the RNIC puts on its DMA ports.

use std::collections::BTreeMap;

use crate::verbs::VerbsError;

/// Memory the RNIC reaches by DMA, addressed by device address (the simulated VA, or the IOVA on the card).
pub trait DmaMemory: Send {
    /// `len` zeroed bytes, page aligned; returns the device address.
    fn alloc(&mut self, len: usize) -> Result<u64, VerbsError>;
    /// True when `[addr, addr+len)` lies inside one allocation.
    fn contains(&self, addr: u64, len: u64) -> bool;
    /// Copy out `len` bytes.
    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, VerbsError>;
    /// Copy `data` in.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError>;
}

impl DmaMemory for HostMemory {
    fn alloc(&mut self, len: usize) -> Result<u64, VerbsError> {
        Ok(HostMemory::alloc(self, len))
    }
    fn contains(&self, addr: u64, len: u64) -> bool {
        HostMemory::contains(self, addr, len)
    }
    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, VerbsError> {
        HostMemory::read(self, addr, len)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        HostMemory::write(self, addr, data)
    }
}

/// Host memory: non-overlapping allocations, each starting at a page-aligned VA.
#[derive(Clone, Debug)]
pub struct HostMemory {
    regions: BTreeMap<u64, Vec<u8>>,
    next: u64,
}

impl Default for HostMemory {
    fn default() -> Self {
        Self::new()
    }
}

const PAGE: u64 = 4096;

impl HostMemory {
    /// Empty memory; the first allocation is at VA 0x7f00_0000_0000 (like a user mmap).
    pub fn new() -> Self {
        HostMemory {
            regions: BTreeMap::new(),
            next: 0x7f00_0000_0000,
        }
    }

    /// Allocate `len` zeroed bytes; returns the VA. A guard page separates allocations.
    pub fn alloc(&mut self, len: usize) -> u64 {
        let va = self.next;
        self.regions.insert(va, vec![0; len]);
        let pages = (len as u64).div_ceil(PAGE) + 1;
        self.next = va + pages * PAGE;
        va
    }

    /// Every allocation (base VA, bytes) in address order: for whole-memory comparisons against a shadow copy.
    pub fn regions(&self) -> Vec<(u64, &[u8])> {
        self.regions.iter().map(|(&b, v)| (b, v.as_slice())).collect()
    }

    /// Free an allocation by its base VA.
    pub fn free(&mut self, va: u64) -> bool {
        self.regions.remove(&va).is_some()
    }

    fn locate(&self, addr: u64, len: u64) -> Option<(u64, usize)> {
        let (&base, v) = self.regions.range(..=addr).next_back()?;
        let off = addr - base;
        let end = off.checked_add(len)?;
        (end <= v.len() as u64).then_some((base, off as usize))
    }

    /// True when `[addr, addr+len)` lies inside one allocation.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        self.locate(addr, len).is_some()
    }

    /// Copy out `len` bytes.
    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, VerbsError> {
        let bad = VerbsError::BadAddress { addr, len: len as u64 };
        let (base, off) = self.locate(addr, len as u64).ok_or(bad)?;
        Ok(self.regions[&base][off..off + len].to_vec())
    }

    /// Copy `data` in.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let bad = VerbsError::BadAddress {
            addr,
            len: data.len() as u64,
        };
        let (base, off) = self.locate(addr, data.len() as u64).ok_or(bad)?;
        let v = self.regions.get_mut(&base).expect("located");
        v[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Read a 64-bit little-endian (host order) word.
    pub fn read_u64(&self, addr: u64) -> Result<u64, VerbsError> {
        let b = self.read(addr, 8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// Write a 64-bit little-endian (host order) word.
    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), VerbsError> {
        self.write(addr, &v.to_le_bytes())
    }
}
