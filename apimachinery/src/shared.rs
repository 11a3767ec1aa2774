//! [`Shared`]: data that is either part of the program (a built-in kind's
//! names, its field table) or built at run time and reference counted (a
//! CustomResourceDefinition's). Both read the same way and clone in O(1);
//! the run-time kind is freed with its last holder, so nothing built for a
//! CRD outlives the CRD's last request, watch or cache entry.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A `&'static T` or an `Arc<T>`, read through `Deref`.
pub enum Shared<T: ?Sized + 'static> {
    /// Part of the program: never freed, cloned as a pointer.
    Static(&'static T),
    /// Built at run time: freed when the last clone goes.
    Owned(Arc<T>),
}

/// A name that may be static or built at run time.
pub type Str = Shared<str>;

impl<T: ?Sized> Shared<T> {
    /// Whether two values are the same allocation (or the same static).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        std::ptr::addr_eq(&**a as *const T, &**b as *const T)
    }
}

impl Str {
    /// A name built at run time.
    pub fn owned(s: &str) -> Str {
        Shared::Owned(Arc::from(s))
    }
}

impl<T> Shared<[T]> {
    /// A list built at run time.
    pub fn owned_slice(v: Vec<T>) -> Shared<[T]> {
        Shared::Owned(Arc::from(v))
    }
}

impl<T> Default for Shared<[T]> {
    fn default() -> Self {
        Shared::Static(&[])
    }
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        match self {
            Shared::Static(r) => Shared::Static(r),
            Shared::Owned(a) => Shared::Owned(Arc::clone(a)),
        }
    }
}

impl<T: ?Sized> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Shared::Static(r) => r,
            Shared::Owned(a) => a,
        }
    }
}

impl<T: ?Sized> AsRef<T> for Shared<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: ?Sized> Borrow<T> for Shared<T> {
    fn borrow(&self) -> &T {
        self
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: ?Sized + Eq> Eq for Shared<T> {}

impl<T: ?Sized + Hash> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        *self == &**other
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == &**other
    }
}

impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        &**self == other.as_str()
    }
}

impl From<&'static str> for Str {
    fn from(s: &'static str) -> Str {
        Shared::Static(s)
    }
}

impl<T: ?Sized + serde::Serialize> serde::Serialize for Shared<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<T: ?Sized + PartialOrd> PartialOrd for Shared<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (**self).partial_cmp(&**other)
    }
}

impl<T: ?Sized + Ord> Ord for Shared<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_owned_read_alike() {
        let a: Str = Shared::Static("pods");
        let b = Str::owned("pods");
        assert_eq!(a, b);
        assert_eq!(a, "pods");
        assert_eq!("pods", b);
        assert_eq!(format!("{a}/{b:?}"), "pods/\"pods\"");
        assert!(!Shared::ptr_eq(&a, &b));
        assert!(Shared::ptr_eq(&b, &b.clone()));
    }

    #[test]
    fn an_owned_value_is_freed_with_its_last_clone() {
        let v: Shared<[u8]> = Shared::owned_slice(vec![1, 2, 3]);
        let Shared::Owned(arc) = &v else {
            unreachable!()
        };
        let weak = Arc::downgrade(arc);
        let copy = v.clone();
        drop(v);
        assert!(weak.upgrade().is_some());
        drop(copy);
        assert!(weak.upgrade().is_none());
    }
}
