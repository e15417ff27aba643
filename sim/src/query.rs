//! How the simulated server reads a list request, the way CloudStack's parameter processing
//! and `buildACLSearchParameters` do: typed parameters, uuid resolution, paging, the root
//! admin's ACL, and MySQL-style `=` / `LIKE` matching.
//!
//! No command logic and no JSON rendering here.

use std::collections::BTreeMap;

use super::world::{SimOwner, World};

/// A CloudStack error answer: HTTP status = `errorcode`, plus `cserrorcode` and text.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub cs_code: Option<u32>,
    pub text: String,
}

/// `InvalidParameterValueException`.
pub const CS_INVALID_PARAMETER: u32 = 4350;
/// `ServerApiException`, which parameter processing throws.
pub const CS_SERVER_API: u32 = 9999;
/// `CloudRuntimeException`.
pub const CS_CLOUD_RUNTIME: u32 = 4250;

impl ApiError {
    /// An `InvalidParameterValueException` from a service: 431 / 4350.
    pub fn invalid(text: impl Into<String>) -> Self {
        ApiError {
            code: 431,
            cs_code: Some(CS_INVALID_PARAMETER),
            text: text.into(),
        }
    }

    /// A `ServerApiException(PARAM_ERROR)` from parameter processing: 431 / 9999.
    pub fn param(text: impl Into<String>) -> Self {
        ApiError {
            code: 431,
            cs_code: Some(CS_SERVER_API),
            text: text.into(),
        }
    }

    pub fn internal(text: impl Into<String>) -> Self {
        ApiError {
            code: 530,
            cs_code: Some(CS_CLOUD_RUNTIME),
            text: text.into(),
        }
    }
}

/// Default and maximum page size (`default.page.size`).
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The parameters of one command, names lower-cased as `BaseCmd.unpackParams` does.
pub struct Params<'a> {
    /// The command lower-cased, as error texts name it (`listvirtualmachines`).
    pub command: String,
    map: &'a BTreeMap<String, String>,
}

impl<'a> Params<'a> {
    pub fn new(command: &str, map: &'a BTreeMap<String, String>) -> Self {
        Params {
            command: command.to_lowercase(),
            map,
        }
    }

    /// A filter's value; an empty one counts as absent. Where the server gives an empty value
    /// a meaning of its own (a UUID, a page size), the accessors below use [`Params::raw`].
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.map
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The value as sent, empty included.
    pub fn raw(&self, name: &str) -> Option<&'a str> {
        self.map.get(name).map(String::as_str)
    }

    pub fn required(&self, name: &str) -> Result<&'a str, ApiError> {
        self.get(name).ok_or_else(|| {
            ApiError::param(format!(
                "Unable to execute API command {} due to missing parameter {name}",
                self.command
            ))
        })
    }

    /// `Boolean.valueOf`: only `true` (any case) is true.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// A numeric parameter; garbage is rejected like a `NumberFormatException`.
    pub fn number(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| self.bad_value(name, v)),
        }
    }

    /// The error for a value that does not parse as the parameter's type.
    pub fn bad_value(&self, name: &str, value: &str) -> ApiError {
        ApiError::param(format!(
            "Unable to execute API command {} due to invalid value {value} for parameter {name}",
            self.command
        ))
    }

    /// The error for a uuid that resolves to nothing (`translateUuidToInternalId`).
    pub fn unknown_uuid(&self, name: &str, value: &str) -> ApiError {
        ApiError::param(format!(
            "Unable to execute API command {} due to invalid value. Invalid parameter {name} \
             value={value} due to incorrect long value format, or entity does not exist or due \
             to incorrect parameter annotation for the field in api cmd class.",
            self.command
        ))
    }

    /// A uuid parameter that must name an entity (removed ones included, as the server's
    /// lookup is `findByUuidIncludingRemoved`).
    /// An empty value is looked up like any other and resolves to nothing
    /// (`translateUuidToInternalId` for parameters older than 3.x, which all used here are).
    pub fn uuid(
        &self,
        name: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Result<Option<&'a str>, ApiError> {
        match self.raw(name) {
            Some(v) if !exists(v) => Err(self.unknown_uuid(name, v)),
            other => Ok(other),
        }
    }

    /// A comma-separated uuid list; every element must resolve.
    pub fn uuid_list(
        &self,
        name: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Result<Option<Vec<&'a str>>, ApiError> {
        let Some(raw) = self.get(name) else {
            return Ok(None);
        };
        let ids: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for id in &ids {
            if !exists(id) {
                return Err(self.unknown_uuid(name, id));
            }
        }
        Ok(Some(ids))
    }
}

/// Which slice of the matches to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub offset: usize,
    pub limit: Option<usize>,
}

impl Page {
    pub fn apply<T>(&self, items: Vec<T>) -> Vec<T> {
        let it = items.into_iter().skip(self.offset);
        match self.limit {
            Some(n) => it.take(n).collect(),
            None => it.collect(),
        }
    }
}

/// `page`/`pagesize` as `ParamProcessWorker` and `BaseListCmd` check them. `max` is
/// `default.page.size` (`None` for -1, no maximum).
pub fn paging(p: &Params, max: Option<u32>) -> Result<Page, ApiError> {
    // `validateSpecificParameters` parses `pagesize` with `Long.valueOf` even when
    // `ParamProcessWorker` skipped an empty INTEGER.
    if p.raw("pagesize") == Some("") {
        return Err(ApiError::param("For input string: \"\""));
    }
    let page = p.number("page")?;
    let size = p.number("pagesize")?;
    match (page, size) {
        (None, Some(s)) if s != -1 => {
            return Err(ApiError::param(
                "\"page\" parameter is required when \"pagesize\" is specified",
            ));
        }
        (Some(_), None) => {
            return Err(ApiError::param(
                "\"pagesize\" parameter is required when \"page\" is specified",
            ));
        }
        _ => {}
    }
    if let (Some(s), Some(m)) = (size, max)
        && s > i64::from(m)
    {
        return Err(ApiError::invalid(format!(
            "Page size can't exceed max allowed page size value: {m}"
        )));
    }
    if size == Some(-1) && page.is_some() {
        return Err(ApiError::invalid(
            "Can't specify page parameter when pagesize is -1 (Unlimited)",
        ));
    }
    let limit = match size {
        Some(-1) => None,
        Some(s) if s < 0 => return Err(p.bad_value("pagesize", &s.to_string())),
        Some(s) => Some(s as usize),
        None => max.map(|m| m as usize),
    };
    let offset = match (page, limit) {
        // `BaseListCmd.getStartIndex`: a page of 0 or less is the first page.
        (Some(pg), Some(l)) if pg > 1 => (pg as usize - 1) * l,
        _ => 0,
    };
    Ok(Page { offset, limit })
}

/// Which owners a listing may return, from `buildACLSearchParameters` for the root admin.
#[derive(Debug, Clone, PartialEq)]
pub struct Acl {
    /// Non-empty: only these owners.
    permitted: Vec<SimOwner>,
    /// Without permitted owners: only this domain (by path prefix when recursive).
    domain: Option<(String, bool)>,
    projects: ProjectCriteria,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProjectCriteria {
    All,
    Skip,
    Only,
}

impl Acl {
    /// Reads `listall`, `account`, `domainid`, `isrecursive` and `projectid`. `has_id` is
    /// whether the request names an entity by `id` (which lifts the own-account default).
    pub fn from_params(p: &Params, w: &World, has_id: bool) -> Result<Acl, ApiError> {
        let list_all = p.flag("listall");
        let domain_id = p.uuid("domainid", |d| w.domain(d).is_some())?;
        let project_id = p.uuid("projectid", |v| v == "-1" || w.project(v).is_some())?;
        let mut permitted = Vec::new();
        let mut projects = ProjectCriteria::All;
        let mut domain = domain_id.map(|d| (d.to_string(), p.flag("isrecursive")));

        if let Some(account) = p.get("account") {
            if project_id.is_some() {
                return Err(ApiError::invalid(
                    "Account and projectId can't be specified together",
                ));
            }
            let in_domain = domain_id.unwrap_or(w.root_domain_id());
            let found = w
                .accounts
                .iter()
                .find(|a| sql_eq(&a.name, account) && a.domain_id == in_domain);
            match found {
                Some(a) => permitted.push(SimOwner::Account {
                    account: a.name.clone(),
                    domain_id: a.domain_id.clone(),
                }),
                None => {
                    let name = w.domain(in_domain).map_or("", |d| d.name.as_str());
                    return Err(ApiError::invalid(format!(
                        "could not find account {account} in domain {name}"
                    )));
                }
            }
        }

        match project_id {
            Some("-1") => {
                projects = if list_all {
                    ProjectCriteria::All
                } else {
                    ProjectCriteria::Only
                };
            }
            Some(pid) => {
                let proj = w.project(pid).expect("resolved above");
                permitted.push(SimOwner::Project {
                    project_id: proj.id.clone(),
                    project: proj.name.clone(),
                    domain_id: proj.domain_id.clone(),
                });
            }
            None => {
                if !has_id {
                    projects = ProjectCriteria::Skip;
                }
                if permitted.is_empty() && domain.is_none() && !list_all && !has_id {
                    permitted.push(w.admin());
                }
            }
        }
        if !permitted.is_empty() {
            domain = None;
        }
        Ok(Acl {
            permitted,
            domain,
            projects,
        })
    }

    /// Narrows the listing to project-owned resources.
    pub fn only_projects(&mut self) {
        self.projects = ProjectCriteria::Only;
    }

    /// Lets project-owned resources into a listing that would skip them.
    pub fn with_projects(&mut self) {
        self.projects = ProjectCriteria::All;
    }

    pub fn admits(&self, owner: &SimOwner, w: &World) -> bool {
        let project_ok = match self.projects {
            ProjectCriteria::All => true,
            ProjectCriteria::Skip => !owner.is_project(),
            ProjectCriteria::Only => owner.is_project(),
        };
        if !project_ok {
            return false;
        }
        if !self.permitted.is_empty() {
            return self.permitted.iter().any(|o| same_owner(o, owner));
        }
        match &self.domain {
            None => true,
            Some((id, false)) => owner.domain_id() == id,
            Some((id, true)) => {
                let path = |d: &str| w.domain(d).map(|d| d.path.clone());
                match (path(id), path(owner.domain_id())) {
                    (Some(scope), Some(own)) => own.starts_with(&scope),
                    _ => false,
                }
            }
        }
    }
}

fn same_owner(a: &SimOwner, b: &SimOwner) -> bool {
    match (a, b) {
        (
            SimOwner::Account {
                account: x,
                domain_id: dx,
            },
            SimOwner::Account {
                account: y,
                domain_id: dy,
            },
        ) => sql_eq(x, y) && dx == dy,
        (SimOwner::Project { project_id: x, .. }, SimOwner::Project { project_id: y, .. }) => {
            x == y
        }
        _ => false,
    }
}

/// MySQL `=` under CloudStack's case-insensitive collation.
pub fn sql_eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// MySQL `LIKE '%kw%'` (case-insensitive; `%` and `_` in the keyword are wildcards too,
/// which is why `_` in a keyword matches any character).
pub fn like_contains(text: &str, keyword: &str) -> bool {
    let pattern: Vec<char> = format!("%{keyword}%").to_lowercase().chars().collect();
    let text: Vec<char> = text.to_lowercase().chars().collect();
    like(&text, &pattern)
}

fn like(text: &[char], pattern: &[char]) -> bool {
    // Classic wildcard matching with backtracking to the last `%`.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '_' || pattern[p] == text[t]) {
            t += 1;
            p += 1;
        } else if p < pattern.len() && pattern[p] == '%' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '%')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimTime;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn like_treats_underscore_and_percent_as_wildcards() {
        assert!(like_contains("prod-node-18f0", "node"));
        assert!(like_contains("prod-node-18f0", "NODE"));
        assert!(like_contains("prodXnode", "prod_node"));
        assert!(like_contains("a-b-c", "a%c"));
        assert!(!like_contains("prod-node", "prod_x"));
        assert!(!like_contains("abc", "abcd"));
        assert!(like_contains("anything", ""));
    }

    #[test]
    fn paging_rules_match_the_server() {
        let page = |pairs: &[(&str, &str)], max| {
            let m = params(pairs);
            paging(&Params::new("listX", &m), max)
        };
        assert_eq!(
            page(&[], Some(500)),
            Ok(Page {
                offset: 0,
                limit: Some(500)
            })
        );
        assert_eq!(
            page(&[("page", "3"), ("pagesize", "20")], Some(500)),
            Ok(Page {
                offset: 40,
                limit: Some(20)
            })
        );
        assert_eq!(
            page(&[("pagesize", "-1")], Some(500)),
            Ok(Page {
                offset: 0,
                limit: None
            })
        );
        assert_eq!(
            page(&[], None),
            Ok(Page {
                offset: 0,
                limit: None
            })
        );
        let err = page(&[("pagesize", "20")], Some(500)).unwrap_err();
        assert_eq!((err.code, err.cs_code), (431, Some(CS_SERVER_API)));
        assert_eq!(
            err.text,
            "\"page\" parameter is required when \"pagesize\" is specified"
        );
        let err = page(&[("page", "1")], Some(500)).unwrap_err();
        assert_eq!(
            err.text,
            "\"pagesize\" parameter is required when \"page\" is specified"
        );
        let err = page(&[("page", "1"), ("pagesize", "501")], Some(500)).unwrap_err();
        assert_eq!((err.code, err.cs_code), (431, Some(CS_INVALID_PARAMETER)));
        assert_eq!(
            err.text,
            "Page size can't exceed max allowed page size value: 500"
        );
        assert!(page(&[("page", "1"), ("pagesize", "501")], None).is_ok());
        let err = page(&[("page", "1"), ("pagesize", "-1")], Some(500)).unwrap_err();
        assert_eq!(
            err.text,
            "Can't specify page parameter when pagesize is -1 (Unlimited)"
        );
        let err = page(&[("page", "x"), ("pagesize", "1")], Some(500)).unwrap_err();
        assert_eq!(
            err.text,
            "Unable to execute API command listx due to invalid value x for parameter page"
        );
    }

    #[test]
    fn acl_follows_build_acl_search_parameters() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let admin = w.admin();
        let dom = w.add_domain("eng");
        let alice = w.add_account("alice", &dom);
        let proj = w.add_project("team");
        let SimOwner::Project { project_id, .. } = proj.clone() else {
            unreachable!()
        };
        let acl = |pairs: &[(&str, &str)], has_id| {
            let m = params(pairs);
            Acl::from_params(&Params::new("listX", &m), &w, has_id)
        };
        let sees = |a: &Acl| {
            [&admin, &alice, &proj]
                .iter()
                .map(|o| a.admits(o, &w))
                .collect::<Vec<_>>()
        };
        assert_eq!(sees(&acl(&[], false).unwrap()), [true, false, false]);
        assert_eq!(
            sees(&acl(&[("listall", "true")], false).unwrap()),
            [true, true, false]
        );
        assert_eq!(
            sees(&acl(&[("listall", "true"), ("projectid", "-1")], false).unwrap()),
            [true, true, true]
        );
        assert_eq!(
            sees(&acl(&[("projectid", "-1")], false).unwrap()),
            [false, false, true]
        );
        assert_eq!(
            sees(&acl(&[("projectid", &project_id)], false).unwrap()),
            [false, false, true]
        );
        assert_eq!(sees(&acl(&[], true).unwrap()), [true, true, true]);
        assert_eq!(
            sees(&acl(&[("account", "alice"), ("domainid", &dom)], false).unwrap()),
            [false, true, false]
        );
        assert_eq!(
            sees(&acl(&[("domainid", &dom)], false).unwrap()),
            [false, true, false]
        );
        let root = w.root_domain_id().to_string();
        assert_eq!(
            sees(&acl(&[("domainid", &root), ("isrecursive", "true")], false).unwrap()),
            [true, true, false]
        );
        let err = acl(&[("account", "alice")], false).unwrap_err();
        assert_eq!(err.text, "could not find account alice in domain ROOT");
        let err = acl(&[("account", "admin"), ("projectid", "-1")], false).unwrap_err();
        assert_eq!(
            err.text,
            "Account and projectId can't be specified together"
        );
        let err = acl(&[("projectid", "nope")], false).unwrap_err();
        assert_eq!(err.code, 431);
        assert!(
            err.text.contains("Invalid parameter projectid value=nope"),
            "{}",
            err.text
        );
    }
}
