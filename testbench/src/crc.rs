//! CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) as RoCEv2's ICRC uses it, and the GF(2) matrix
//! algebra the RTL ICRC engine is built from.
//!
//! The CRC register update is linear over GF(2): after `n` bytes, `state' = A^n * state ^ L_n(data)`.
//! The RTL engine ([`IcrcMatrices`]) processes 64 bytes a beat with `A^64` and `L_64`, starts a frame from a
//! constant that already skips the Ethernet header, and finishes a short last beat by "un-advancing" the
//! register over the zero bytes past the end (`A^-k`: one constant matrix per octal digit of k, two for
//! the 64-byte beat).
//! This module is the one source of those constants: the RTL's `Constant<>` fields are filled from here.

/// Reflected CRC-32 polynomial (IEEE 802.3, zlib).
pub const CRC32_POLY_REFLECTED: u32 = 0xEDB8_8320;

/// Bytes of the pseudo-LRH that the ICRC covers in front of the IP header (all 0xFF).
pub const ICRC_LRH_BYTES: usize = 8;

/// Advance the CRC register (no pre- or post-inversion) over `data`.
pub fn crc32_update(mut state: u32, data: &[u8]) -> u32 {
    for &b in data {
        state ^= b as u32;
        for _ in 0..8 {
            state = if state & 1 != 0 {
                (state >> 1) ^ CRC32_POLY_REFLECTED
            } else {
                state >> 1
            };
        }
    }
    state
}

/// Standard CRC-32 (`zlib.crc32`): initial 0xFFFFFFFF, final inversion.
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_update(0xFFFF_FFFF, data)
}

/// Register state after the initial value and the 8-byte all-ones pseudo-LRH: 0xDEBB20E3, the seed rxe
/// passes to `crc32_le`.
pub fn icrc_seed_state() -> u32 {
    crc32_update(0xFFFF_FFFF, &[0xFF; ICRC_LRH_BYTES])
}

/// A 32x32 matrix over GF(2): `cols[i]` is the image of unit vector `1 << i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mat32 {
    pub cols: [u32; 32],
}

impl Mat32 {
    pub fn identity() -> Self {
        let mut cols = [0u32; 32];
        for (i, c) in cols.iter_mut().enumerate() {
            *c = 1 << i;
        }
        Mat32 { cols }
    }

    /// The matrix of a linear function on 32-bit vectors.
    pub fn of(f: impl Fn(u32) -> u32) -> Self {
        let mut cols = [0u32; 32];
        for (i, c) in cols.iter_mut().enumerate() {
            *c = f(1 << i);
        }
        Mat32 { cols }
    }

    pub fn apply(&self, v: u32) -> u32 {
        let mut r = 0;
        for i in 0..32 {
            if v >> i & 1 != 0 {
                r ^= self.cols[i];
            }
        }
        r
    }

    pub fn mul(&self, other: &Mat32) -> Mat32 {
        Mat32::of(|v| self.apply(other.apply(v)))
    }

    pub fn pow(&self, mut n: u32) -> Mat32 {
        let mut acc = Mat32::identity();
        let mut base = *self;
        while n > 0 {
            if n & 1 != 0 {
                acc = base.mul(&acc);
            }
            base = base.mul(&base);
            n >>= 1;
        }
        acc
    }

    /// Row `r` as a bit mask over the input bits: output bit r = parity(row(r) & input).
    pub fn row(&self, r: usize) -> u32 {
        let mut m = 0;
        for i in 0..32 {
            if self.cols[i] >> r & 1 != 0 {
                m |= 1 << i;
            }
        }
        m
    }

    /// Inverse by Gauss-Jordan elimination; `None` when singular.
    pub fn inverse(&self) -> Option<Mat32> {
        // Work on rows: a[r] = row r of self, b[r] = row r of identity.
        let mut a: Vec<u32> = (0..32).map(|r| self.row(r)).collect();
        let mut b: Vec<u32> = (0..32).map(|r| 1u32 << r).collect();
        for col in 0..32 {
            let pivot = (col..32).find(|&r| a[r] >> col & 1 != 0)?;
            a.swap(col, pivot);
            b.swap(col, pivot);
            for r in 0..32 {
                if r != col && a[r] >> col & 1 != 0 {
                    a[r] ^= a[col];
                    b[r] ^= b[col];
                }
            }
        }
        // b holds the rows of the inverse.
        let mut cols = [0u32; 32];
        for (r, row) in b.iter().enumerate() {
            for (i, c) in cols.iter_mut().enumerate() {
                if row >> i & 1 != 0 {
                    *c |= 1 << r;
                }
            }
        }
        Some(Mat32 { cols })
    }
}

/// The register advanced over one zero byte: `A`.
pub fn zero_byte_matrix() -> Mat32 {
    Mat32::of(|s| crc32_update(s, &[0]))
}

/// Contribution of a `BEAT`-byte data word (byte 0 first on the wire, bit 0 of byte 0 first) to the register,
/// as one 32-bit row mask per (output bit, input byte): `rows[r][byte]` has bit `i` set when data bit
/// `byte*8+i` feeds output bit `r`.
pub fn data_rows(beat: usize) -> Vec<Vec<u8>> {
    let mut rows = vec![vec![0u8; beat]; 32];
    let mut buf = vec![0u8; beat];
    for byte in 0..beat {
        for bit in 0..8 {
            buf.iter_mut().for_each(|b| *b = 0);
            buf[byte] = 1 << bit;
            let out = crc32_update(0, &buf);
            for (r, row) in rows.iter_mut().enumerate() {
                if out >> r & 1 != 0 {
                    row[byte] |= 1 << bit;
                }
            }
        }
    }
    rows
}

/// Bits of the trailing zero-byte count the ICRC engine undoes per pipeline stage (one of 2^3 matrices).
pub const UNADVANCE_DIGIT_BITS: usize = 3;

/// Every constant of the RTL ICRC engine for a beat of `beat` bytes.
#[derive(Clone, Debug)]
pub struct IcrcMatrices {
    /// Bytes per beat.
    pub beat: usize,
    /// `A^beat`: the register carried across one full beat.
    pub advance_beat: Mat32,
    /// `rows[r][byte]`: data bits feeding output bit r (see [`data_rows`]).
    pub data_rows: Vec<Vec<u8>>,
    /// `unadvance[g][d] = A^-(d * 8^g)`: un-advance over the trailing zero bytes of digit g (base 8) of their
    /// count, d = 0..8 (d = 0 is the identity). The RTL takes one digit, three bits of the count, per stage
    /// by picking one of eight products.
    pub unadvance: Vec<Vec<Mat32>>,
}

impl IcrcMatrices {
    pub fn new(beat: usize) -> Self {
        assert!(beat.is_power_of_two() && beat >= 1);
        let a = zero_byte_matrix();
        let a_inv = a.inverse().expect("CRC zero-byte step is invertible");
        let digits = (beat.trailing_zeros() as usize).div_ceil(UNADVANCE_DIGIT_BITS);
        let unadvance = (0..digits)
            .map(|g| {
                (0..1u32 << UNADVANCE_DIGIT_BITS)
                    .map(|d| a_inv.pow(d << (UNADVANCE_DIGIT_BITS * g)))
                    .collect()
            })
            .collect();
        IcrcMatrices {
            beat,
            advance_beat: a.pow(beat as u32),
            data_rows: data_rows(beat),
            unadvance,
        }
    }

    /// Register value after a first beat whose first `skip` bytes (the Ethernet header) are not covered,
    /// before its data contribution: `A^(beat-skip) * seed`. XOR the data contribution of the beat (with the
    /// skipped bytes zeroed) onto it.
    pub fn first_base(&self, skip: usize) -> u32 {
        assert!(skip <= self.beat);
        crc32_update(icrc_seed_state(), &vec![0u8; self.beat - skip])
    }

    /// Data contribution of one beat (`data.len() == beat`), from a zero register.
    pub fn data_part(&self, data: &[u8]) -> u32 {
        let mut r = 0u32;
        for (bit, row) in self.data_rows.iter().enumerate() {
            let mut p = 0u8;
            for (b, m) in data.iter().zip(row) {
                p ^= b & m;
            }
            if p.count_ones() & 1 == 1 {
                r |= 1 << bit;
            }
        }
        r
    }

    /// Bit-accurate software model of the RTL engine's algorithm: CRC register over a frame given as
    /// beats, skipping the first `skip` bytes of beat 0. `last_len` is the valid byte count of the last beat
    /// (1..=beat). Returns the ICRC (inverted register).
    pub fn engine_model(&self, beats: &[Vec<u8>], skip: usize, last_len: usize) -> u32 {
        let mut state = 0u32;
        for (i, beat) in beats.iter().enumerate() {
            let mut d = beat.clone();
            if i == 0 {
                d[..skip].iter_mut().for_each(|b| *b = 0);
            }
            if i + 1 == beats.len() {
                d[last_len..].iter_mut().for_each(|b| *b = 0);
            }
            let base = if i == 0 {
                self.first_base(skip)
            } else {
                self.advance_beat.apply(state)
            };
            state = base ^ self.data_part(&d);
        }
        let k = self.beat - last_len;
        for (g, m) in self.unadvance.iter().enumerate() {
            state = m[k >> (UNADVANCE_DIGIT_BITS * g) & ((1 << UNADVANCE_DIGIT_BITS) - 1)].apply(state);
        }
        !state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn seed_is_rxe_seed() {
        // rxe seeds crc32_le with 0xDEBB20E3: the register after 0xFFFFFFFF and 8 x 0xFF.
        assert_eq!(icrc_seed_state(), 0xDEBB_20E3);
    }

    #[test]
    fn inverse_undoes_zero_bytes() {
        let a = zero_byte_matrix();
        let ai = a.inverse().unwrap();
        assert_eq!(a.mul(&ai), Mat32::identity());
        let s = 0x1234_5678;
        assert_eq!(ai.pow(5).apply(crc32_update(s, &[0; 5])), s);
    }

    #[test]
    fn engine_model_equals_bytewise_crc() {
        let m = IcrcMatrices::new(64);
        let mut x = 0x9E37_79B9u32;
        for len in [1usize, 2, 13, 50, 51, 63, 64, 65, 127, 128, 129, 300, 1000] {
            let frame: Vec<u8> = (0..len + 14)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let want = !crc32_update(icrc_seed_state(), &frame[14..]);
            let beats: Vec<Vec<u8>> = frame
                .chunks(64)
                .map(|c| {
                    let mut v = c.to_vec();
                    v.resize(64, 0xAA);
                    v
                })
                .collect();
            let last_len = (frame.len() - 1) % 64 + 1;
            assert_eq!(m.engine_model(&beats, 14, last_len), want, "len {len}");
        }
    }
}
