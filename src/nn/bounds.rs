//! The one mapping between a box action space's bounds and the unit box [-1, 1]^d that box
//! policies work in: a Gaussian policy's mean and a tanh-squashed sample live in unit space, and
//! [`ActionBounds`] scales them to the environment's bounds (and clips what is sent).
//!
//! Working in unit space keeps one initialisation and one entropy target right for every game:
//! a unit-variance Gaussian covers Pendulum's [-2, 2] as it covers MuJoCo's [-1, 1].

use anyhow::{Result, bail};
use tch::{Device, Tensor};

use tandem_env::ActionSpace;

/// Per-dimension affine map `a = center + half_range * u` from unit space to the bounds.
/// An unbounded dimension (an infinite bound) maps as the identity and is never clipped.
#[derive(Debug)]
pub struct ActionBounds {
    center: Tensor,
    half_range: Tensor,
    low: Tensor,
    high: Tensor,
    bounded: bool,
}

impl ActionBounds {
    /// The bounds of a box space, as tensors on `device`; an error for a discrete space.
    pub fn new(space: &ActionSpace, device: Device) -> Result<ActionBounds> {
        let ActionSpace::Box { low, high } = space else {
            bail!("action bounds: {space} has no bounds (a box action space has)");
        };
        let finite = |l: f32, h: f32| l.is_finite() && h.is_finite();
        let center: Vec<f32> = low
            .iter()
            .zip(high.iter())
            .map(|(&l, &h)| if finite(l, h) { (l + h) / 2.0 } else { 0.0 })
            .collect();
        let half_range: Vec<f32> = low
            .iter()
            .zip(high.iter())
            .map(|(&l, &h)| if finite(l, h) { (h - l) / 2.0 } else { 1.0 })
            .collect();
        let on_device = |v: &[f32]| Tensor::from_slice(v).to_device(device);
        Ok(ActionBounds {
            center: on_device(&center),
            half_range: on_device(&half_range),
            low: on_device(low),
            high: on_device(high),
            bounded: low.iter().zip(high.iter()).all(|(&l, &h)| finite(l, h)),
        })
    }

    /// Whether every dimension has finite bounds (what a squashed policy needs).
    pub fn is_bounded(&self) -> bool {
        self.bounded
    }

    /// Unit-space actions `[B, d]` in the environment's units.
    pub fn scale(&self, unit: &Tensor) -> Tensor {
        &self.center + &self.half_range * unit
    }

    /// Environment-unit actions `[B, d]` back in unit space.
    pub fn unscale(&self, action: &Tensor) -> Tensor {
        (action - &self.center) / &self.half_range
    }

    /// `ln |da/du|` of [`ActionBounds::scale`], summed over dimensions: what a log-density in
    /// unit space loses when it is read in the environment's units.
    pub fn log_abs_det(&self) -> f64 {
        let logs = self.half_range.log().sum(tch::Kind::Double);
        logs.double_value(&[])
    }

    /// Environment-unit actions clipped into the bounds: what is sent, never what is stored.
    pub fn clip(&self, action: &Tensor) -> Tensor {
        action.clamp_tensor(Some(&self.low), Some(&self.high))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_space_maps_onto_the_bounds_and_back() {
        let space = ActionSpace::Box {
            low: vec![-2.0, 0.0].into(),
            high: vec![2.0, 1.0].into(),
        };
        let bounds = ActionBounds::new(&space, Device::Cpu).unwrap();
        let unit = Tensor::from_slice(&[-1.0f32, 1.0, 0.5, 0.0]).view([2, 2]);
        let scaled = bounds.scale(&unit);
        assert_eq!(
            Vec::<f32>::try_from(scaled.view([-1])).unwrap(),
            [-2.0, 1.0, 1.0, 0.5]
        );
        let back = bounds.unscale(&scaled);
        assert!(back.allclose(&unit, 1e-6, 1e-6, false));
        let wide = Tensor::from_slice(&[-3.0f32, 2.0]).view([1, 2]);
        let clipped = Vec::<f32>::try_from(bounds.clip(&wide).view([-1])).unwrap();
        assert_eq!(clipped, [-2.0, 1.0]);
        assert!((bounds.log_abs_det() - (2.0f64.ln() + 0.5f64.ln())).abs() < 1e-12);
        assert!(bounds.is_bounded());
    }

    #[test]
    fn an_unbounded_dimension_is_left_alone_and_a_discrete_space_is_refused() {
        let space = ActionSpace::Box {
            low: vec![f32::NEG_INFINITY].into(),
            high: vec![f32::INFINITY].into(),
        };
        let bounds = ActionBounds::new(&space, Device::Cpu).unwrap();
        let x = Tensor::from_slice(&[7.5f32]).view([1, 1]);
        assert_eq!(bounds.scale(&x).double_value(&[0, 0]), 7.5);
        assert_eq!(bounds.clip(&x).double_value(&[0, 0]), 7.5);
        assert!(!bounds.is_bounded());
        let err = ActionBounds::new(&ActionSpace::discrete(3), Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("has no bounds"), "{err}");
    }
}
