//! The card's register BAR through Linux VFIO (vfio-pci): the container and group set up with the type-1
//! IOMMU, the device opened by its address, the register BAR (`pci::REG_BAR`) mapped, 32-bit accesses as
//! volatile loads and stores. This is the part of the host software that only the card runs; the system
//! calls go through [`Sys`] so that the sequence and every failure message are tested against a fake.
//!
//! Not here yet: DMA memory (hugepages mapped through the IOMMU with `VFIO_IOMMU_MAP_DMA`), which the driver
//! needs for queues and buffers on the card.

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use testbench::driver::{CsrBus, DriverError};

// <linux/vfio.h>: _IO(';', VFIO_BASE + n)
const VFIO_BASE: u64 = (b';' as u64) << 8 | 100;
pub const VFIO_GET_API_VERSION: u64 = VFIO_BASE;
pub const VFIO_CHECK_EXTENSION: u64 = VFIO_BASE + 1;
pub const VFIO_SET_IOMMU: u64 = VFIO_BASE + 2;
pub const VFIO_GROUP_GET_STATUS: u64 = VFIO_BASE + 3;
pub const VFIO_GROUP_SET_CONTAINER: u64 = VFIO_BASE + 4;
pub const VFIO_GROUP_GET_DEVICE_FD: u64 = VFIO_BASE + 6;
pub const VFIO_DEVICE_GET_REGION_INFO: u64 = VFIO_BASE + 8;
pub const VFIO_API_VERSION: i32 = 0;
pub const VFIO_TYPE1V2_IOMMU: u64 = 3;
pub const VFIO_GROUP_FLAGS_VIABLE: u32 = 1;
pub const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;

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

/// The system calls VFIO needs (`Real` makes them; the tests fake them).
pub trait Sys {
    fn open(&mut self, path: &Path) -> std::io::Result<i32>;
    /// `ioctl(fd, req, arg)`; `arg` is an integer or a pointer to the request's struct.
    fn ioctl(&mut self, fd: i32, req: u64, arg: usize) -> std::io::Result<i32>;
    fn mmap(&mut self, fd: i32, offset: u64, len: usize) -> std::io::Result<*mut u8>;
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
    fn munmap(&mut self, p: *mut u8, len: usize) {
        // SAFETY: `p` came from `mmap` with `len`
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
    fn close(&mut self, fd: i32) {
        // SAFETY: an fd this process opened
        unsafe { libc::close(fd) };
    }
}

/// The register BAR of the card, mapped.
pub struct VfioBar<S: Sys = Real> {
    sys: S,
    base: *mut u8,
    len: usize,
    fds: Vec<i32>,
}

impl<S: Sys> VfioBar<S> {
    /// Open the card at `bdf` in IOMMU group `group` (its node `/dev/vfio/N` under `dev`) and map BAR `bar`.
    pub fn open(mut sys: S, dev: &Path, group: u32, bdf: &str, bar: u32) -> Result<Self> {
        let mut fds = Vec::new();
        let r = Self::setup(&mut sys, dev, group, bdf, bar, &mut fds);
        match r {
            Ok((base, len)) => Ok(VfioBar { sys, base, len, fds }),
            Err(e) => {
                for fd in fds.into_iter().rev() {
                    sys.close(fd);
                }
                Err(e)
            }
        }
    }

    fn setup(sys: &mut S, dev: &Path, group: u32, bdf: &str, bar: u32, fds: &mut Vec<i32>) -> Result<(*mut u8, usize)> {
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
        let mut ri = RegionInfo { argsz: std::mem::size_of::<RegionInfo>() as u32, index: bar, ..Default::default() };
        sys.ioctl(d, VFIO_DEVICE_GET_REGION_INFO, &mut ri as *mut _ as usize).with_context(|| format!("VFIO_DEVICE_GET_REGION_INFO BAR{bar}"))?;
        if ri.size < crate::pci::REG_BAR_MIN {
            bail!("BAR{bar} is {} bytes, the design needs {}", ri.size, crate::pci::REG_BAR_MIN);
        }
        if ri.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
            bail!("BAR{bar} cannot be mapped (region flags {:#x})", ri.flags);
        }
        let len = crate::pci::REG_BAR_MIN as usize;
        let p = sys.mmap(d, ri.offset, len).with_context(|| format!("mapping BAR{bar}"))?;
        Ok((p, len))
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
        self.sys.munmap(self.base, self.len);
        for fd in std::mem::take(&mut self.fds).into_iter().rev() {
            self.sys.close(fd);
        }
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
}
