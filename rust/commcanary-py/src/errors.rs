//! Running core work off the interpreter, and mapping its outcome.
//!
//! Every binding function calls [`detached`]: it releases the interpreter
//! while the core works, catches a panic anywhere in that work (including a
//! rayon worker, whose panic rayon carries to the joining thread) and maps
//! the result onto the exception classes of `commcanary.errors`. Those
//! classes are defined in Python, so every error the extension raises
//! pickles by reference and crosses process pools.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use commcanary_core::{Error, ErrorKind};
use pyo3::prelude::*;

pyo3::import_exception!(commcanary.errors, InputError);
pyo3::import_exception!(commcanary.errors, OptionError);
pyo3::import_exception!(commcanary.errors, OutputError);
pyo3::import_exception!(commcanary.errors, BudgetError);
pyo3::import_exception!(commcanary.errors, InternalError);

/// The Python exception for a core error; `path` names the input the error
/// is about (added to input errors' messages).
pub(crate) fn to_py_err(err: &Error, path: Option<&str>) -> PyErr {
    let message = match path {
        Some(p) => err.with_path(p),
        None => err.message().to_owned(),
    };
    match err.kind() {
        ErrorKind::Option => OptionError::new_err((
            err.option_name().unwrap_or("option").to_owned(),
            err.option_rule().to_owned(),
        )),
        ErrorKind::Budget => BudgetError::new_err(message),
        ErrorKind::Output => OutputError::new_err(message),
        ErrorKind::Internal => InternalError::new_err(message),
        _ => InputError::new_err(message),
    }
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a worker panicked".to_owned()
    }
}

/// Runs `work` with the interpreter released; a core error becomes the
/// matching `commcanary.errors` exception (naming `path`), a panic an
/// `InternalError`.
pub(crate) fn detached<T, F>(py: Python<'_>, path: Option<&str>, work: F) -> PyResult<T>
where
    F: FnOnce() -> commcanary_core::Result<T> + Send,
    T: Send,
{
    match py.detach(move || catch_unwind(AssertUnwindSafe(work))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(to_py_err(&err, path)),
        Err(payload) => {
            let detail = panic_text(payload.as_ref());
            Err(to_py_err(
                &Error::internal(format!("a worker panicked: {detail}")),
                None,
            ))
        }
    }
}
