//! The card through Linux VFIO (vfio-pci): the container and group set up with the type-1 IOMMU and the
//! device opened by its address ([`Vfio`]); the register BAR (`pci::REG_BAR`) mapped for 32-bit volatile
//! loads and stores ([`VfioBar`], a [`CsrBus`]); and DMA memory ([`VfioDma`], a [`DmaMemory`]): one region of
//! hugepages (or, where none are reserved, ordinary pages) mapped with `VFIO_IOMMU_MAP_DMA` at a fixed IOVA,
//! which is the device address the driver hands the RNIC. This is the part of the host software that only the
//! card runs; the system calls go through [`Sys`] so that the sequence and every failure message are tested
//! against a fake kernel.

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::driver::{CsrBus, DriverError};
use crate::memory::DmaMemory;
use crate::verbs::VerbsError;

// <linux/vfio.h>: _IO(';', VFIO_BASE + n)
const VFIO_BASE: u64 = (b';' as u64) << 8 | 100;
pub const VFIO_GET_API_VERSION: u64 = VFIO_BASE;
pub const VFIO_CHECK_EXTENSION: u64 = VFIO_BASE + 1;
pub const VFIO_SET_IOMMU: u64 = VFIO_BASE + 2;
pub const VFIO_GROUP_GET_STATUS: u64 = VFIO_BASE + 3;
pub const VFIO_GROUP_SET_CONTAINER: u64 = VFIO_BASE + 4;
pub const VFIO_GROUP_GET_DEVICE_FD: u64 = VFIO_BASE + 6;
pub const VFIO_DEVICE_GET_REGION_INFO: u64 = VFIO_BASE + 8;
pub const VFIO_IOMMU_MAP_DMA: u64 = VFIO_BASE + 13;
pub const VFIO_IOMMU_UNMAP_DMA: u64 = VFIO_BASE + 14;
pub const VFIO_API_VERSION: i32 = 0;
pub const VFIO_TYPE1V2_IOMMU: u64 = 3;
pub const VFIO_GROUP_FLAGS_VIABLE: u32 = 1;
pub const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
pub const VFIO_DMA_MAP_FLAG_READ: u32 = 1;
pub const VFIO_DMA_MAP_FLAG_WRITE: u32 = 2;

/// Where the DMA region starts in the device's address space: above 4 GiB (clear of the x86 MSI window at
/// 0xfee00000 and of 32-bit holes) and far inside the 39-bit aperture every IOMMU of this class offers.
pub const DMA_IOVA_BASE: u64 = 1 << 32;
/// A hugepage (2 MiB): the region's size is rounded up to whole ones.
pub const HUGEPAGE: usize = 2 << 20;
const PAGE: u64 = 4096;

/// `struct vfio_group_status`.
#[repr(C)]
#[derive(Default)]
pub struct GroupStatus {
    pub argsz: u32,
    pub flags: u32,
}

/// `struct vfio_region_info`.
#[repr(C)]
#[derive(Default)]
pub struct RegionInfo {
    pub argsz: u32,
    pub flags: u32,
    pub index: u32,
    pub cap_offset: u32,
    pub size: u64,
    pub offset: u64,
}

/// `struct vfio_iommu_type1_dma_map`.
#[repr(C)]
#[derive(Default)]
pub struct DmaMap {
    pub argsz: u32,
    pub flags: u32,
    pub vaddr: u64,
    pub iova: u64,
    pub size: u64,
}

/// `struct vfio_iommu_type1_dma_unmap` (without its flexible tail).
#[repr(C)]
#[derive(Default)]
pub struct DmaUnmap {
    pub argsz: u32,
    pub flags: u32,
    pub iova: u64,
    pub size: u64,
}

/// The system calls VFIO needs (`Real` makes them; the tests fake them).
pub trait Sys: Send {
    fn open(&mut self, path: &Path) -> std::io::Result<i32>;
    /// `ioctl(fd, req, arg)`; `arg` is an integer or a pointer to the request's struct.
    fn ioctl(&mut self, fd: i32, req: u64, arg: usize) -> std::io::Result<i32>;
    fn mmap(&mut self, fd: i32, offset: u64, len: usize) -> std::io::Result<*mut u8>;
    /// Anonymous, shared, zeroed memory; of hugepages when `huge`.
    fn mmap_anon(&mut self, len: usize, huge: bool) -> std::io::Result<*mut u8>;
    fn munmap(&mut self, p: *mut u8, len: usize);
    fn close(&mut self, fd: i32);
}

/// The real system calls.
pub struct Real;

impl Sys for Real {
    fn open(&mut self, path: &Path) -> std::io::Result<i32> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
        // SAFETY: a NUL-terminated path; the fd is owned by the caller
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 { Err(std::io::Error::last_os_error()) } else { Ok(fd) }
    }
    fn ioctl(&mut self, fd: i32, req: u64, arg: usize) -> std::io::Result<i32> {
        // SAFETY: `arg` is an integer or points to the struct `req` takes, alive for the call
        let r = unsafe { libc::ioctl(fd, req as _, arg) };
        if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r) }
    }
    fn mmap(&mut self, fd: i32, offset: u64, len: usize) -> std::io::Result<*mut u8> {
        // SAFETY: a shared mapping of the device region; unmapped in `Drop`
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, offset as libc::off_t) };
        if p == libc::MAP_FAILED { Err(std::io::Error::last_os_error()) } else { Ok(p as *mut u8) }
    }
    fn mmap_anon(&mut self, len: usize, huge: bool) -> std::io::Result<*mut u8> {
        let flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | if huge { libc::MAP_HUGETLB } else { 0 };
        // SAFETY: a fresh anonymous mapping; unmapped in `Drop`
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED { Err(std::io::Error::last_os_error()) } else { Ok(p as *mut u8) }
    }
    fn munmap(&mut self, p: *mut u8, len: usize) {
        // SAFETY: `p` came from `mmap` with `len`
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
    fn close(&mut self, fd: i32) {
        // SAFETY: an fd this process opened
        unsafe { libc::close(fd) };
    }
}

/// The card opened through VFIO: container (type-1 v2 IOMMU), group and device. Its BAR and its DMA memory
/// hold it; the fds close when the last of them goes.
pub struct Vfio<S: Sys = Real> {
    sys: Mutex<S>,
    container: i32,
    fds: Vec<i32>,
    device: i32,
}

impl<S: Sys> Vfio<S> {
    /// Open the card at `bdf` in IOMMU group `group` (its node `/dev/vfio/N` under `dev`).
    pub fn open(mut sys: S, dev: &Path, group: u32, bdf: &str) -> Result<Arc<Self>> {
        let mut fds = Vec::new();
        match Self::setup(&mut sys, dev, group, bdf, &mut fds) {
            Ok(()) => Ok(Arc::new(Vfio { sys: Mutex::new(sys), container: fds[0], device: fds[2], fds })),
            Err(e) => {
                for fd in fds.into_iter().rev() {
                    sys.close(fd);
                }
                Err(e)
            }
        }
    }

    fn setup(sys: &mut S, dev: &Path, group: u32, bdf: &str, fds: &mut Vec<i32>) -> Result<()> {
        let cpath = dev.join("vfio/vfio");
        let container = sys.open(&cpath).with_context(|| format!("opening {} (is the vfio module loaded?)", cpath.display()))?;
        fds.push(container);
        let v = sys.ioctl(container, VFIO_GET_API_VERSION, 0).context("VFIO_GET_API_VERSION")?;
        if v != VFIO_API_VERSION {
            bail!("VFIO API version {v}, this tool speaks {VFIO_API_VERSION}");
        }
        if sys.ioctl(container, VFIO_CHECK_EXTENSION, VFIO_TYPE1V2_IOMMU as usize).context("VFIO_CHECK_EXTENSION")? == 0 {
            bail!("the kernel's VFIO has no type-1 v2 IOMMU (vfio_iommu_type1 not loaded?)");
        }
        let gpath = dev.join(format!("vfio/{group}"));
        let g = sys.open(&gpath).with_context(|| format!("opening {}", gpath.display()))?;
        fds.push(g);
        let mut st = GroupStatus { argsz: std::mem::size_of::<GroupStatus>() as u32, flags: 0 };
        sys.ioctl(g, VFIO_GROUP_GET_STATUS, &mut st as *mut _ as usize).context("VFIO_GROUP_GET_STATUS")?;
        if st.flags & VFIO_GROUP_FLAGS_VIABLE == 0 {
            bail!("IOMMU group {group} is not viable: every device in /sys/kernel/iommu_groups/{group}/devices must be bound to vfio-pci (or have no driver)");
        }
        let c = container;
        sys.ioctl(g, VFIO_GROUP_SET_CONTAINER, &c as *const i32 as usize).context("VFIO_GROUP_SET_CONTAINER")?;
        sys.ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1V2_IOMMU as usize).context("VFIO_SET_IOMMU (type-1 v2)")?;
        let name = std::ffi::CString::new(bdf).map_err(|_| anyhow!("a PCI address without NUL"))?;
        let d = sys
            .ioctl(g, VFIO_GROUP_GET_DEVICE_FD, name.as_ptr() as usize)
            .with_context(|| format!("VFIO_GROUP_GET_DEVICE_FD {bdf} (is it in group {group}?)"))?;
        fds.push(d);
        Ok(())
    }

    fn sys(&self) -> std::sync::MutexGuard<'_, S> {
        self.sys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Map BAR `bar` (at least `pci::REG_BAR_MIN` bytes of it).
    pub fn bar(self: &Arc<Self>, bar: u32) -> Result<VfioBar<S>> {
        let mut sys = self.sys();
        let mut ri = RegionInfo { argsz: std::mem::size_of::<RegionInfo>() as u32, index: bar, ..Default::default() };
        sys.ioctl(self.device, VFIO_DEVICE_GET_REGION_INFO, &mut ri as *mut _ as usize)
            .with_context(|| format!("VFIO_DEVICE_GET_REGION_INFO BAR{bar}"))?;
        if ri.size < crate::pci::REG_BAR_MIN {
            bail!("BAR{bar} is {} bytes, the design needs {}", ri.size, crate::pci::REG_BAR_MIN);
        }
        if ri.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
            bail!("BAR{bar} cannot be mapped (region flags {:#x})", ri.flags);
        }
        let len = crate::pci::REG_BAR_MIN as usize;
        let base = sys.mmap(self.device, ri.offset, len).with_context(|| format!("mapping BAR{bar}"))?;
        Ok(VfioBar { vfio: self.clone(), base, len })
    }

    /// `bytes` of DMA memory (rounded up to whole hugepages) mapped for the device's reads and writes at
    /// [`DMA_IOVA_BASE`]. Hugepages when the host has them reserved (`vm.nr_hugepages`), else ordinary pages,
    /// which VFIO pins as it maps them (within the locked-memory limit).
    pub fn dma(self: &Arc<Self>, bytes: usize) -> Result<VfioDma<S>> {
        let len = bytes.max(1).div_ceil(HUGEPAGE) * HUGEPAGE;
        let mut sys = self.sys();
        let (base, huge) = match sys.mmap_anon(len, true) {
            Ok(p) => (p, true),
            Err(_) => (
                sys.mmap_anon(len, false).with_context(|| format!("allocating {} MiB of DMA memory", len >> 20))?,
                false,
            ),
        };
        let mut m = DmaMap {
            argsz: std::mem::size_of::<DmaMap>() as u32,
            flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: base as u64,
            iova: DMA_IOVA_BASE,
            size: len as u64,
        };
        if let Err(e) = sys.ioctl(self.container, VFIO_IOMMU_MAP_DMA, &mut m as *mut _ as usize) {
            sys.munmap(base, len);
            let hint = match e.raw_os_error() {
                Some(libc::ENOMEM) | Some(libc::EPERM) => {
                    "the pages could not be pinned: raise the locked-memory limit (ulimit -l, or run as root), or reserve                      hugepages (sysctl vm.nr_hugepages=N)"
                }
                Some(libc::EINVAL) => "the IOMMU refused the address range",
                _ => "",
            };
            return Err(anyhow!(e)).context(format!(
                "VFIO_IOMMU_MAP_DMA of {} MiB at IOVA {DMA_IOVA_BASE:#x}{}{hint}",
                len >> 20,
                if hint.is_empty() { "" } else { ": " }
            ));
        }
        Ok(VfioDma { vfio: self.clone(), base, len, huge, used: 0 })
    }
}

impl<S: Sys> Drop for Vfio<S> {
    fn drop(&mut self) {
        let fds = std::mem::take(&mut self.fds);
        let mut sys = self.sys();
        for fd in fds.into_iter().rev() {
            sys.close(fd);
        }
    }
}

/// The register BAR of the card, mapped.
pub struct VfioBar<S: Sys = Real> {
    vfio: Arc<Vfio<S>>,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone and is used only through `&mut self`.
unsafe impl<S: Sys> Send for VfioBar<S> {}

impl<S: Sys> VfioBar<S> {
    /// Open the card and map its register BAR (`Vfio::open` then `Vfio::bar`).
    pub fn open(sys: S, dev: &Path, group: u32, bdf: &str, bar: u32) -> Result<Self> {
        Vfio::open(sys, dev, group, bdf)?.bar(bar)
    }
    /// The opened card (for its DMA memory).
    pub fn vfio(&self) -> Arc<Vfio<S>> {
        self.vfio.clone()
    }
}

impl<S: Sys> CsrBus for VfioBar<S> {
    fn write32(&mut self, addr: u32, value: u32) -> Result<(), DriverError> {
        if addr as usize + 4 > self.len || addr % 4 != 0 {
            return Err(DriverError::Bus(format!("write at {addr:#x} outside the mapped BAR")));
        }
        // SAFETY: inside the mapping, aligned
        unsafe { std::ptr::write_volatile(self.base.add(addr as usize) as *mut u32, value) };
        Ok(())
    }
    fn read32(&mut self, addr: u32) -> Result<u32, DriverError> {
        if addr as usize + 4 > self.len || addr % 4 != 0 {
            return Err(DriverError::Bus(format!("read at {addr:#x} outside the mapped BAR")));
        }
        // SAFETY: inside the mapping, aligned
        Ok(unsafe { std::ptr::read_volatile(self.base.add(addr as usize) as *const u32) })
    }
}

impl<S: Sys> Drop for VfioBar<S> {
    fn drop(&mut self) {
        self.vfio.sys().munmap(self.base, self.len);
    }
}

/// DMA memory of the card: one region mapped through the IOMMU at [`DMA_IOVA_BASE`]; allocations are carved
/// from it in order (page aligned, zeroed, never given back: a run's rings and buffers live as long as it).
/// Addresses are IOVAs, the device's addresses; reads and writes by the host go through them.
pub struct VfioDma<S: Sys = Real> {
    vfio: Arc<Vfio<S>>,
    base: *mut u8,
    len: usize,
    huge: bool,
    used: usize,
}

// SAFETY: the mapping belongs to this value alone; the host touches it only through `&self`/`&mut self`
// (the driver keeps it behind a mutex), the device through the IOMMU.
unsafe impl<S: Sys> Send for VfioDma<S> {}

impl<S: Sys> VfioDma<S> {
    /// Bytes mapped, and whether of hugepages.
    pub fn size(&self) -> (usize, bool) {
        (self.len, self.huge)
    }
    /// Bytes allocated so far.
    pub fn used(&self) -> usize {
        self.used
    }
    fn offset(&self, addr: u64, len: u64) -> Result<usize, VerbsError> {
        let bad = VerbsError::BadAddress { addr, len };
        let off = addr.checked_sub(DMA_IOVA_BASE).ok_or(bad.clone())?;
        let end = off.checked_add(len).ok_or(bad.clone())?;
        if end > self.used as u64 {
            return Err(bad);
        }
        Ok(off as usize)
    }
}

impl<S: Sys> DmaMemory for VfioDma<S> {
    fn alloc(&mut self, len: usize) -> Result<u64, VerbsError> {
        let start = (self.used as u64).div_ceil(PAGE) * PAGE;
        let end = start + (len as u64).max(1).div_ceil(PAGE) * PAGE;
        if end > self.len as u64 {
            return Err(VerbsError::OutOfMemory(len, self.len.saturating_sub(start as usize)));
        }
        self.used = end as usize;
        Ok(DMA_IOVA_BASE + start)
    }
    fn contains(&self, addr: u64, len: u64) -> bool {
        self.offset(addr, len).is_ok()
    }
    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, VerbsError> {
        let off = self.offset(addr, len as u64)?;
        // what the device wrote before the host saw its doorbell or CQE is visible from here on
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let mut v = vec![0u8; len];
        // SAFETY: inside the mapping (checked above)
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(off), v.as_mut_ptr(), len) };
        Ok(v)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), VerbsError> {
        let off = self.offset(addr, data.len() as u64)?;
        // SAFETY: inside the mapping (checked above)
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(off), data.len()) };
        // the bytes are in memory before the doorbell that follows is written
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

impl<S: Sys> Drop for VfioDma<S> {
    fn drop(&mut self) {
        let mut u = DmaUnmap { argsz: std::mem::size_of::<DmaUnmap>() as u32, flags: 0, iova: DMA_IOVA_BASE, size: self.len as u64 };
        let mut sys = self.vfio.sys();
        let _ = sys.ioctl(self.vfio.container, VFIO_IOMMU_UNMAP_DMA, &mut u as *mut _ as usize);
        sys.munmap(self.base, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A fake kernel: records every call, answers as configured, backs the BAR with memory.
    #[derive(Clone, Default)]
    struct Fake {
        log: Arc<Mutex<Vec<String>>>,
        viable: bool,
        bar_size: u64,
        missing: Option<&'static str>,
        mem: Arc<Mutex<Vec<u32>>>,
        /// no hugepages reserved: a hugepage mapping fails
        no_huge: bool,
        /// VFIO_IOMMU_MAP_DMA fails with this errno
        map_errno: Option<i32>,
        /// the anonymous memory handed out (kept alive here), and the last DMA map (vaddr, iova, size, flags)
        anon: Arc<Mutex<Vec<Vec<u64>>>>,
        mapped: Arc<Mutex<Option<(u64, u64, u64, u32)>>>,
    }

    impl Sys for Fake {
        fn open(&mut self, path: &Path) -> std::io::Result<i32> {
            let p = path.to_string_lossy().into_owned();
            self.log.lock().unwrap().push(format!("open {}", p.rsplit('/').next().unwrap()));
            if self.missing.is_some_and(|m| p.ends_with(m)) {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            Ok(if p.ends_with("vfio/vfio") { 10 } else { 11 })
        }
        fn ioctl(&mut self, fd: i32, req: u64, arg: usize) -> std::io::Result<i32> {
            self.log.lock().unwrap().push(format!("ioctl {fd} {}", req - VFIO_BASE));
            match req {
                VFIO_GET_API_VERSION => Ok(0),
                VFIO_CHECK_EXTENSION => Ok(i32::from(arg as u64 == VFIO_TYPE1V2_IOMMU)),
                VFIO_GROUP_GET_STATUS => {
                    // SAFETY: the caller passes a GroupStatus
                    let st = unsafe { &mut *(arg as *mut GroupStatus) };
                    assert_eq!(st.argsz, 8);
                    st.flags = u32::from(self.viable);
                    Ok(0)
                }
                VFIO_GROUP_SET_CONTAINER => {
                    // SAFETY: the caller passes a pointer to the container fd
                    assert_eq!(unsafe { *(arg as *const i32) }, 10);
                    Ok(0)
                }
                VFIO_GROUP_GET_DEVICE_FD => {
                    // SAFETY: a C string
                    let n = unsafe { std::ffi::CStr::from_ptr(arg as *const libc::c_char) };
                    assert_eq!(n.to_str().unwrap(), "0000:3b:00.0");
                    Ok(12)
                }
                VFIO_IOMMU_MAP_DMA => {
                    // SAFETY: the caller passes a DmaMap
                    let m = unsafe { &*(arg as *const DmaMap) };
                    assert_eq!((fd, m.argsz), (10, 32), "mapped on the container");
                    if let Some(e) = self.map_errno {
                        return Err(std::io::Error::from_raw_os_error(e));
                    }
                    *self.mapped.lock().unwrap() = Some((m.vaddr, m.iova, m.size, m.flags));
                    Ok(0)
                }
                VFIO_IOMMU_UNMAP_DMA => {
                    // SAFETY: the caller passes a DmaUnmap
                    let u = unsafe { &*(arg as *const DmaUnmap) };
                    let m = self.mapped.lock().unwrap().take().expect("unmapped what was mapped");
                    assert_eq!((u.iova, u.size), (m.1, m.2));
                    Ok(0)
                }
                VFIO_DEVICE_GET_REGION_INFO => {
                    // SAFETY: the caller passes a RegionInfo
                    let ri = unsafe { &mut *(arg as *mut RegionInfo) };
                    assert_eq!((ri.argsz, ri.index), (32, 2));
                    ri.size = self.bar_size;
                    ri.offset = 2 << 40;
                    ri.flags = 7;
                    Ok(0)
                }
                _ => Ok(0),
            }
        }
        fn mmap(&mut self, fd: i32, offset: u64, len: usize) -> std::io::Result<*mut u8> {
            self.log.lock().unwrap().push(format!("mmap {fd} {offset:#x} {len:#x}"));
            let mut m = self.mem.lock().unwrap();
            m.resize(len / 4, 0);
            Ok(m.as_mut_ptr() as *mut u8)
        }
        fn mmap_anon(&mut self, len: usize, huge: bool) -> std::io::Result<*mut u8> {
            self.log.lock().unwrap().push(format!("mmap_anon {len:#x} {}", if huge { "huge" } else { "pages" }));
            if huge && self.no_huge {
                return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
            }
            let mut v = vec![0u64; len / 8];
            let p = v.as_mut_ptr() as *mut u8;
            self.anon.lock().unwrap().push(v);
            Ok(p)
        }
        fn munmap(&mut self, _p: *mut u8, len: usize) {
            self.log.lock().unwrap().push(format!("munmap {len:#x}"));
        }
        fn close(&mut self, fd: i32) {
            self.log.lock().unwrap().push(format!("close {fd}"));
        }
    }

    #[test]
    fn the_bar_is_mapped_by_the_vfio_sequence_and_released() {
        let f = Fake { viable: true, bar_size: 4 << 20, ..Default::default() };
        let (log, mem) = (f.log.clone(), f.mem.clone());
        {
            let mut bar = VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).unwrap();
            bar.write32(0x10_0010, 0x13).unwrap();
            assert_eq!(mem.lock().unwrap()[0x10_0010 / 4], 0x13);
            mem.lock().unwrap()[0x100 / 4] = 0xBEEF;
            assert_eq!(bar.read32(0x100).unwrap(), 0xBEEF);
            assert!(bar.read32(2 << 20).is_err() && bar.write32(3, 0).is_err(), "outside or unaligned");
        }
        let want = [
            "open vfio", "ioctl 10 0", "ioctl 10 1", "open 27", "ioctl 11 3", "ioctl 11 4", "ioctl 10 2", "ioctl 11 6", "ioctl 12 8",
            "mmap 12 0x20000000000 0x200000", "munmap 0x200000", "close 12", "close 11", "close 10",
        ];
        assert_eq!(*log.lock().unwrap(), want);
    }

    #[test]
    fn each_failure_says_what_to_do_and_closes_what_it_opened() {
        let f = Fake { viable: false, bar_size: 4 << 20, ..Default::default() };
        let log = f.log.clone();
        let e = format!("{:#}", VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).err().unwrap());
        assert!(e.contains("group 27 is not viable") && e.contains("bound to vfio-pci"), "{e}");
        assert!(log.lock().unwrap().ends_with(&["close 11".to_string(), "close 10".to_string()]));
        let f = Fake { viable: true, bar_size: 4 << 20, missing: Some("vfio/vfio"), ..Default::default() };
        let e = format!("{:#}", VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).err().unwrap());
        assert!(e.contains("is the vfio module loaded"), "{e}");
        let f = Fake { viable: true, bar_size: 64 << 10, ..Default::default() };
        let e = format!("{:#}", VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).err().unwrap());
        assert!(e.contains("BAR2 is 65536 bytes"), "{e}");
    }

    #[test]
    fn dma_memory_is_mapped_through_the_iommu_and_carved_page_by_page() {
        let f = Fake { viable: true, bar_size: 4 << 20, no_huge: true, ..Default::default() };
        let (log, mapped) = (f.log.clone(), f.mapped.clone());
        {
            let bar = VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).unwrap();
            let mut dma = bar.vfio().dma(3 << 20).unwrap();
            // rounded up to two hugepages' worth, of ordinary pages (no hugepages reserved), device read+write
            assert_eq!(dma.size(), (4 << 20, false));
            let (vaddr, iova, size, flags) = mapped.lock().unwrap().unwrap();
            assert!(vaddr != 0 && iova == DMA_IOVA_BASE && size == 4 << 20 && flags == 3);
            let a = dma.alloc(100).unwrap();
            let b = dma.alloc(5000).unwrap();
            assert_eq!((a, b), (DMA_IOVA_BASE, DMA_IOVA_BASE + 4096), "page aligned, in order");
            dma.write(b + 10, b"payload").unwrap();
            assert_eq!(dma.read(b + 10, 7).unwrap(), b"payload");
            assert_eq!(dma.read(a, 4).unwrap(), [0; 4], "zeroed");
            assert!(dma.contains(b, 8192) && !dma.contains(b, 8193), "only what was allocated");
            assert!(dma.read(DMA_IOVA_BASE - 1, 2).is_err() && dma.write(b + 8190, &[0; 4]).is_err());
            let e = dma.alloc(8 << 20).unwrap_err();
            assert!(matches!(e, VerbsError::OutOfMemory(..)), "{e}");
            drop(dma);
            assert!(mapped.lock().unwrap().is_none(), "unmapped on drop");
        }
        let l = log.lock().unwrap();
        let at = |s: &str| l.iter().position(|x| x == s).unwrap_or_else(|| panic!("{s} not in {l:?}"));
        assert!(at("mmap_anon 0x400000 huge") < at("mmap_anon 0x400000 pages"));
        assert!(at("ioctl 10 13") < at("ioctl 10 14") && at("ioctl 10 14") < at("close 10"));
    }

    #[test]
    fn a_dma_map_that_cannot_pin_says_what_to_do_and_releases_its_memory() {
        let f = Fake { viable: true, bar_size: 4 << 20, map_errno: Some(libc::ENOMEM), ..Default::default() };
        let log = f.log.clone();
        let bar = VfioBar::open(f, Path::new("/dev"), 27, "0000:3b:00.0", 2).unwrap();
        let e = format!("{:#}", bar.vfio().dma(1 << 20).err().unwrap());
        assert!(e.contains("VFIO_IOMMU_MAP_DMA of 2 MiB") && e.contains("ulimit -l") && e.contains("nr_hugepages"), "{e}");
        assert!(log.lock().unwrap().ends_with(&["munmap 0x200000".to_string()]), "{:?}", log.lock().unwrap());
    }
}
