//! Turning a slice of values into a TensorBoard histogram.
//!
//! Buckets are equal-width over `[min, max]`, [`BUCKET_COUNT`] of them, the
//! same count TensorBoard's own v2 histogram summaries default to. TensorBoard
//! rebins for display anyway, so a few even buckets carry all the information
//! it shows, in a fraction of the bytes of TensorFlow's legacy ~1500
//! exponential buckets.

use crate::proto::HistogramProto;

/// Number of equal-width buckets a histogram with a non-zero range gets.
pub const BUCKET_COUNT: usize = 30;

/// Why a histogram could not be built.
#[derive(Debug, Clone, PartialEq)]
pub enum HistogramError {
    Empty,
    NonFinite { index: usize, value: f32 },
}

impl std::fmt::Display for HistogramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistogramError::Empty => write!(f, "no values to histogram"),
            HistogramError::NonFinite { index, value } => {
                write!(
                    f,
                    "value at index {index} is {value}; histograms need finite values"
                )
            }
        }
    }
}

/// Builds the histogram of `values`: exact count, min, max, sum and sum of
/// squares (accumulated in `f64`), and [`BUCKET_COUNT`] equal-width buckets,
/// or a single bucket when every value is equal.
pub fn histogram_of(values: &[f32]) -> Result<HistogramProto, HistogramError> {
    if values.is_empty() {
        return Err(HistogramError::Empty);
    }
    let mut min = f64::INFINITY;
    let mut max = f64::NEG_INFINITY;
    let mut sum = 0.0f64;
    let mut sum_squares = 0.0f64;
    for (index, &value) in values.iter().enumerate() {
        if !value.is_finite() {
            return Err(HistogramError::NonFinite { index, value });
        }
        let value = f64::from(value);
        min = min.min(value);
        max = max.max(value);
        sum += value;
        sum_squares += value * value;
    }

    let (bucket_limit, bucket) = if min == max {
        (vec![max], vec![values.len() as f64])
    } else {
        let width = (max - min) / BUCKET_COUNT as f64;
        let mut counts = vec![0.0f64; BUCKET_COUNT];
        for &value in values {
            // Rounding can put the maximum (or a value a hair below a limit)
            // one past the end; the last bucket is closed on the right.
            let index = (((f64::from(value) - min) / width) as usize).min(BUCKET_COUNT - 1);
            counts[index] += 1.0;
        }
        let mut limits: Vec<f64> = (1..BUCKET_COUNT).map(|i| min + width * i as f64).collect();
        limits.push(max);
        (limits, counts)
    };

    Ok(HistogramProto {
        min,
        max,
        num: values.len() as f64,
        sum,
        sum_squares,
        bucket_limit,
        bucket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_exact() {
        let histogram = histogram_of(&[1.0, -2.0, 3.5, 0.0]).unwrap();
        assert_eq!(histogram.min, -2.0);
        assert_eq!(histogram.max, 3.5);
        assert_eq!(histogram.num, 4.0);
        assert_eq!(histogram.sum, 2.5);
        assert_eq!(histogram.sum_squares, 1.0 + 4.0 + 12.25);
    }

    #[test]
    fn buckets_are_even_and_count_every_value() {
        let values: Vec<f32> = (0..=300).map(|i| i as f32 / 10.0).collect(); // 0.0 ..= 30.0
        let histogram = histogram_of(&values).unwrap();
        assert_eq!(histogram.bucket.len(), BUCKET_COUNT);
        assert_eq!(histogram.bucket_limit.len(), BUCKET_COUNT);
        assert_eq!(histogram.bucket.iter().sum::<f64>(), values.len() as f64);
        assert_eq!(*histogram.bucket_limit.last().unwrap(), 30.0);
        for (i, limit) in histogram.bucket_limit.iter().enumerate() {
            assert!(
                (limit - (i + 1) as f64).abs() < 1e-9,
                "limit {i} is {limit}"
            );
        }
        // Ten values per unit-wide bucket, plus the maximum in the last one.
        assert!(
            histogram.bucket[..BUCKET_COUNT - 1]
                .iter()
                .all(|&c| (9.0..=11.0).contains(&c))
        );
        assert_eq!(histogram.bucket[BUCKET_COUNT - 1], 11.0);
    }

    #[test]
    fn constant_values_get_one_bucket() {
        let histogram = histogram_of(&[0.25; 7]).unwrap();
        assert_eq!(histogram.bucket_limit, vec![0.25]);
        assert_eq!(histogram.bucket, vec![7.0]);
    }

    #[test]
    fn empty_and_non_finite_input_is_rejected_with_position() {
        assert_eq!(histogram_of(&[]), Err(HistogramError::Empty));
        let error = histogram_of(&[1.0, 2.0, f32::NAN]).unwrap_err();
        assert!(matches!(error, HistogramError::NonFinite { index: 2, .. }));
        assert!(error.to_string().contains("index 2 is NaN"));
        let error = histogram_of(&[f32::NEG_INFINITY]).unwrap_err();
        assert!(error.to_string().contains("index 0 is -inf"));
    }
}
