//! TFRecord framing, the container format of TensorBoard event files.
//!
//! Each record is `u64 length (LE) | u32 masked crc32c(length) | data |
//! u32 masked crc32c(data)`. The CRCs are "masked" (rotated and offset) so that
//! a CRC computed over data that itself embeds CRCs stays well distributed.

use std::fmt;

/// Bytes of framing before the payload: length and its masked CRC.
pub const HEADER_LEN: usize = 12;
/// Bytes of framing after the payload: the payload's masked CRC.
pub const FOOTER_LEN: usize = 4;

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC-32C (Castagnoli) of `bytes`, masked as TFRecord requires.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Appends one framed record holding `payload` to `out`.
pub fn append_record(out: &mut Vec<u8>, payload: &[u8]) {
    let length = (payload.len() as u64).to_le_bytes();
    out.reserve(HEADER_LEN + payload.len() + FOOTER_LEN);
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&masked_crc32c(payload).to_le_bytes());
}

/// A complete record whose framing does not check out: the file is corrupt
/// at `offset` (not merely cut short).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// Zero-based index of the bad record.
    pub index: usize,
    /// Byte offset of the bad record's header in the file.
    pub offset: u64,
    /// Which check failed.
    pub problem: &'static str,
}

impl fmt::Display for CorruptRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record {} at byte offset {}: {}",
            self.index, self.offset, self.problem
        )
    }
}

impl std::error::Error for CorruptRecord {}

/// The records found in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Records<'a> {
    /// Payloads of every complete, CRC-checked record, in order.
    pub payloads: Vec<&'a [u8]>,
    /// Bytes after the last complete record that do not form a whole record
    /// (a writer killed mid-record, or one still writing). Zero for a clean file.
    pub incomplete_tail: usize,
}

/// Splits `bytes` into records, checking both CRCs of every complete record.
///
/// A trailing partial record is reported in [`Records::incomplete_tail`]
/// rather than as an error, as TensorBoard's own reader tolerates it; a
/// complete record with a bad CRC is an error.
pub fn split_records(bytes: &[u8]) -> Result<Records<'_>, CorruptRecord> {
    let mut payloads = Vec::new();
    let mut offset = 0usize;
    loop {
        let rest = &bytes[offset..];
        if rest.len() < HEADER_LEN {
            return Ok(Records {
                payloads,
                incomplete_tail: rest.len(),
            });
        }
        let corrupt = |problem| CorruptRecord {
            index: payloads.len(),
            offset: offset as u64,
            problem,
        };
        let length_bytes: [u8; 8] = rest[..8].try_into().expect("slice of 8 bytes");
        let length_crc = u32::from_le_bytes(rest[8..12].try_into().expect("slice of 4 bytes"));
        if masked_crc32c(&length_bytes) != length_crc {
            return Err(corrupt("length CRC mismatch"));
        }
        let length = u64::from_le_bytes(length_bytes);
        let available = (rest.len() - HEADER_LEN) as u64;
        if length > available.saturating_sub(FOOTER_LEN as u64) {
            return Ok(Records {
                payloads,
                incomplete_tail: rest.len(),
            });
        }
        let length = length as usize;
        let payload = &rest[HEADER_LEN..HEADER_LEN + length];
        let footer = &rest[HEADER_LEN + length..HEADER_LEN + length + FOOTER_LEN];
        let data_crc = u32::from_le_bytes(footer.try_into().expect("slice of 4 bytes"));
        if masked_crc32c(payload) != data_crc {
            return Err(corrupt("data CRC mismatch"));
        }
        payloads.push(payload);
        offset += HEADER_LEN + length + FOOTER_LEN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Published CRC-32C check values (RFC 3720, appendix B.4, and the
    // "123456789" check value of the Castagnoli polynomial).
    #[test]
    fn crc32c_matches_published_vectors() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c::crc32c(&ascending), 0x46dd_794e);
        let descending: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c::crc32c(&descending), 0x113f_db5c);
    }

    // Expected bytes produced by TensorBoard 2.21's own
    // `tensorboard.summary.writer.record_writer.RecordWriter` (see
    // scripts/tb-read-golden.py), so the masking is checked against an
    // independent implementation, not against itself.
    #[test]
    fn framing_matches_tensorboard_record_writer() {
        let cases: [(&[u8], &str); 3] = [
            (b"", "000000000000000029039807d8ea82a2"),
            (b"hello", "0500000000000000eab2043e68656c6c6fbb1f1c19"),
            (
                b"brain.Event:2",
                "0d000000000000003c37b834627261696e2e4576656e743a32ee01067c",
            ),
        ];
        for (payload, expected_hex) in cases {
            let mut framed = Vec::new();
            append_record(&mut framed, payload);
            assert_eq!(hex(&framed), expected_hex, "payload {payload:?}");
        }
    }

    #[test]
    fn masking_rotates_and_offsets() {
        // crc32c("123456789") = 0xe3069283; rotr 15 = 0x2507c60d; + delta.
        assert_eq!(
            masked_crc32c(b"123456789"),
            0x2507_c60du32.wrapping_add(MASK_DELTA)
        );
    }

    #[test]
    fn split_round_trips_many_records() {
        let payloads: Vec<Vec<u8>> = (0..50u8).map(|n| vec![n; n as usize * 7]).collect();
        let mut file = Vec::new();
        for payload in &payloads {
            append_record(&mut file, payload);
        }
        let records = split_records(&file).unwrap();
        assert_eq!(records.incomplete_tail, 0);
        assert_eq!(records.payloads.len(), payloads.len());
        for (read, written) in records.payloads.iter().zip(&payloads) {
            assert_eq!(*read, written.as_slice());
        }
    }

    #[test]
    fn every_truncation_keeps_the_complete_prefix() {
        let mut file = Vec::new();
        append_record(&mut file, b"first record");
        let first_len = file.len();
        append_record(&mut file, b"second record, cut anywhere");
        for cut in first_len..file.len() {
            let records = split_records(&file[..cut]).unwrap();
            assert_eq!(records.payloads, vec![&b"first record"[..]], "cut at {cut}");
            assert_eq!(records.incomplete_tail, cut - first_len);
        }
    }

    #[test]
    fn flipped_bits_are_reported_as_corruption_with_offset() {
        let mut file = Vec::new();
        append_record(&mut file, b"good");
        let second_offset = file.len();
        append_record(&mut file, b"payload to damage");
        let mut damaged = file.clone();
        damaged[second_offset + HEADER_LEN + 3] ^= 0x10;
        let error = split_records(&damaged).unwrap_err();
        assert_eq!(error.index, 1);
        assert_eq!(error.offset, second_offset as u64);
        assert_eq!(error.problem, "data CRC mismatch");

        let mut damaged_length = file;
        damaged_length[second_offset] ^= 0x01;
        let error = split_records(&damaged_length).unwrap_err();
        assert_eq!(error.problem, "length CRC mismatch");
        assert!(
            error
                .to_string()
                .contains(&format!("byte offset {second_offset}"))
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
