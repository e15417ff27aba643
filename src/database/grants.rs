//! One line of `SHOW GRANTS`, read into what it grants: privileges (each with its columns, if
//! any) on an object to an account, roles to an account, or a proxy. The forms are those the
//! servers print (MariaDB 10.x, MySQL 5.7 and 8.0), not everything a person may type; a line
//! that is none of them is `None`, and its caller says nothing about it rather than guess.

/// What one `SHOW GRANTS` line grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// `GRANT SELECT (`a`, `b`), INSERT ON `db`.`t` TO `u`@`h` [IDENTIFIED BY ...] [WITH ...]`.
    Privileges {
        privileges: Vec<Privilege>,
        on: Object,
        to: Account,
        grant_option: bool,
    },
    /// `GRANT `r` TO `u`@`h`` (MariaDB) or `GRANT `r`@`%` TO `u`@`h`` (MySQL 8): the role's
    /// privileges are on lines of their own.
    Roles { roles: Vec<Account>, to: Account },
    /// `GRANT PROXY ON 'a'@'h' TO 'u'@'h'`.
    Proxy { on: Account, to: Account },
}

/// A privilege, in upper case with its words joined by one space (`ALL PRIVILEGES`), and the
/// columns it is limited to (empty for the whole object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    pub name: String,
    pub columns: Vec<String>,
}

/// `db.table`, where `*` is any; `kind` is `PROCEDURE`, `FUNCTION` or `PACKAGE` for a routine
/// (absent, or `TABLE`, for a table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub kind: Option<String>,
    pub database: Name,
    pub table: Name,
}

/// A name in a grant: `*`, or a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Any,
    Named(String),
}

impl Name {
    fn matches(&self, name: &str) -> bool {
        match self {
            Name::Any => true,
            Name::Named(n) => n == name,
        }
    }
}

/// `user@host`; a MariaDB role has no host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub user: String,
    pub host: Option<String>,
}

/// How much of a table the lines grant `SELECT` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// The whole table (a grant on it, its database or `*.*`).
    Whole,
    /// Only these columns (lower case).
    Columns(Vec<String>),
    /// No line grants it (a role's or a wildcard database's grant is not followed).
    None,
}

impl Grant {
    /// The privileges beyond reading it gives, as a warning names them: all but `USAGE` and
    /// `SELECT`, and `PROXY`. A role grant gives none by itself.
    pub fn beyond_select(&self) -> Vec<String> {
        match self {
            Grant::Privileges { privileges, .. } => privileges
                .iter()
                .filter(|p| !matches!(p.name.as_str(), "USAGE" | "SELECT"))
                .map(|p| p.name.clone())
                .collect(),
            Grant::Proxy { .. } => vec!["PROXY".to_string()],
            Grant::Roles { .. } => Vec::new(),
        }
    }
}

/// How much of `database`.`table` `grants` let their account read.
pub fn select_access(grants: &[Grant], database: &str, table: &str) -> Access {
    let mut columns: Vec<String> = Vec::new();
    for grant in grants {
        let Grant::Privileges { privileges, on, .. } = grant else {
            continue;
        };
        let is_table = on.kind.as_deref().is_none_or(|k| k == "TABLE");
        if !is_table || !on.database.matches(database) || !on.table.matches(table) {
            continue;
        }
        for p in privileges {
            if !matches!(p.name.as_str(), "SELECT" | "ALL" | "ALL PRIVILEGES") {
                continue;
            }
            if p.columns.is_empty() {
                return Access::Whole;
            }
            columns.extend(p.columns.iter().map(|c| c.to_ascii_lowercase()));
        }
    }
    if columns.is_empty() {
        Access::None
    } else {
        columns.sort();
        columns.dedup();
        Access::Columns(columns)
    }
}

/// A piece of a line: a bare word (upper case), a quoted name or string, or a sign.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Sign(char),
}

/// The line in tokens; `None` for an unterminated quote.
fn tokens(line: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '`' | '\'' | '"' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        '\\' if c != '`' => text.push(chars.next()?),
                        q if q == c && chars.peek() == Some(&c) => {
                            chars.next();
                            text.push(c);
                        }
                        q if q == c => break,
                        other => text.push(other),
                    }
                }
                out.push(Token::Quoted(text));
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '$' => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if !(n.is_ascii_alphanumeric() || n == '_' || n == '$') {
                        break;
                    }
                    word.push(n);
                    chars.next();
                }
                out.push(Token::Word(word.to_ascii_uppercase()));
            }
            other => out.push(Token::Sign(other)),
        }
    }
    Some(out)
}

/// A cursor over a line's tokens.
struct Cursor {
    tokens: Vec<Token>,
    at: usize,
}

impl Cursor {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn is_sign(&self, sign: char) -> bool {
        self.peek() == Some(&Token::Sign(sign))
    }

    /// Takes `word` if it is next.
    fn word(&mut self, word: &str) -> bool {
        let is = self.is_word(word);
        if is {
            self.at += 1;
        }
        is
    }

    fn sign(&mut self, sign: char) -> bool {
        let is = self.is_sign(sign);
        if is {
            self.at += 1;
        }
        is
    }

    /// A name: quoted, or a bare word as written.
    fn name(&mut self) -> Option<String> {
        match self.next()? {
            Token::Quoted(n) | Token::Word(n) => Some(n),
            Token::Sign(_) => None,
        }
    }

    /// `user[@host]`.
    fn account(&mut self) -> Option<Account> {
        let user = self.name()?;
        let host = if self.sign('@') {
            Some(self.name()?)
        } else {
            None
        };
        Some(Account { user, host })
    }

    /// `a, b, ...` of accounts, up to the word `TO`.
    fn accounts(&mut self) -> Option<Vec<Account>> {
        let mut list = vec![self.account()?];
        while self.sign(',') {
            list.push(self.account()?);
        }
        Some(list)
    }

    /// `*` or a name.
    fn object_name(&mut self) -> Option<Name> {
        if self.sign('*') {
            Some(Name::Any)
        } else {
            self.name().map(Name::Named)
        }
    }
}

/// Reads one line of `SHOW GRANTS`.
pub fn parse(line: &str) -> Option<Grant> {
    let mut c = Cursor {
        tokens: tokens(line)?,
        at: 0,
    };
    if !c.word("GRANT") {
        return None;
    }
    if c.is_word("PROXY") && c.tokens.get(c.at + 1) == Some(&Token::Word("ON".into())) {
        c.at += 2;
        let on = c.account()?;
        if !c.word("TO") {
            return None;
        }
        let to = c.account()?;
        return Some(Grant::Proxy { on, to });
    }
    if matches!(c.peek(), Some(Token::Quoted(_))) {
        let roles = c.accounts()?;
        if !c.word("TO") {
            return None;
        }
        let to = c.account()?;
        return Some(Grant::Roles { roles, to });
    }
    let privileges = match privileges(&mut c)? {
        Listed::Privileges(p) => p,
        Listed::Roles(roles) => {
            return Some(Grant::Roles {
                roles,
                to: c.account()?,
            });
        }
    };
    let on = object(&mut c)?;
    if !c.word("TO") {
        return None;
    }
    let to = c.account()?;
    let mut grant_option = false;
    while let Some(t) = c.next() {
        if t == Token::Word("WITH".into()) && c.word("GRANT") && c.word("OPTION") {
            grant_option = true;
        }
    }
    Some(Grant::Privileges {
        privileges,
        on,
        to,
        grant_option,
    })
}

/// What comes between `GRANT` and `ON` (privileges), or `TO` (bare role names).
enum Listed {
    Privileges(Vec<Privilege>),
    Roles(Vec<Account>),
}

/// `SELECT (`a`, `b`), ALL PRIVILEGES, ...` up to and with `ON`, or role names up to and
/// with `TO`.
fn privileges(c: &mut Cursor) -> Option<Listed> {
    let mut list = Vec::new();
    loop {
        let mut words = Vec::new();
        while let Some(Token::Word(w)) = c.peek() {
            if w == "ON" || w == "TO" {
                break;
            }
            words.push(w.clone());
            c.at += 1;
        }
        if words.is_empty() {
            return None;
        }
        let mut columns = Vec::new();
        if c.sign('(') {
            loop {
                columns.push(c.name()?);
                if c.sign(')') {
                    break;
                }
                if !c.sign(',') {
                    return None;
                }
            }
        }
        list.push(Privilege {
            name: words.join(" "),
            columns,
        });
        if c.sign(',') {
            continue;
        }
        if c.word("ON") {
            return Some(Listed::Privileges(list));
        }
        if c.word("TO") && list.iter().all(|p| p.columns.is_empty()) {
            let roles = list
                .into_iter()
                .map(|p| Account {
                    user: p.name,
                    host: None,
                })
                .collect();
            return Some(Listed::Roles(roles));
        }
        return None;
    }
}

/// `[TABLE|PROCEDURE|FUNCTION|PACKAGE [BODY]] db.table`.
fn object(c: &mut Cursor) -> Option<Object> {
    let mut kind = None;
    for k in ["TABLE", "PROCEDURE", "FUNCTION", "PACKAGE"] {
        if c.word(k) {
            c.word("BODY");
            kind = Some(k.to_string());
            break;
        }
    }
    let database = c.object_name()?;
    if !c.sign('.') {
        return None;
    }
    let table = c.object_name()?;
    Some(Object {
        kind,
        database,
        table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(user: &str, host: Option<&str>) -> Account {
        Account {
            user: user.into(),
            host: host.map(Into::into),
        }
    }

    fn privilege(name: &str, columns: &[&str]) -> Privilege {
        Privilege {
            name: name.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn beyond(line: &str) -> Vec<String> {
        parse(line)
            .unwrap_or_else(|| panic!("{line}"))
            .beyond_select()
    }

    #[test]
    fn mariadb_lines() {
        // MariaDB 10.11's SHOW GRANTS for the harness's reader and for CloudStack's own user.
        assert_eq!(
            parse(
                "GRANT USAGE ON *.* TO `cksdrift`@`127.0.0.1` IDENTIFIED BY PASSWORD \
                 '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'"
            ),
            Some(Grant::Privileges {
                privileges: vec![privilege("USAGE", &[])],
                on: Object {
                    kind: None,
                    database: Name::Any,
                    table: Name::Any
                },
                to: account("cksdrift", Some("127.0.0.1")),
                grant_option: false,
            })
        );
        assert_eq!(
            parse("GRANT SELECT (`id`, `uuid`) ON `cloud`.`vm_instance` TO `cksdrift`@`%`"),
            Some(Grant::Privileges {
                privileges: vec![privilege("SELECT", &["id", "uuid"])],
                on: Object {
                    kind: None,
                    database: Name::Named("cloud".into()),
                    table: Name::Named("vm_instance".into())
                },
                to: account("cksdrift", Some("%")),
                grant_option: false,
            })
        );
        assert_eq!(
            beyond("GRANT ALL PRIVILEGES ON `cloud`.* TO `cloud`@`localhost` WITH GRANT OPTION"),
            ["ALL PRIVILEGES"]
        );
        assert_eq!(
            parse("GRANT `auditor` TO `cksdrift`@`%`"),
            Some(Grant::Roles {
                roles: vec![account("auditor", None)],
                to: account("cksdrift", Some("%"))
            })
        );
        assert_eq!(
            parse("GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION"),
            Some(Grant::Proxy {
                on: account("", Some("%")),
                to: account("root", Some("localhost"))
            })
        );
        assert_eq!(
            beyond("GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION"),
            ["PROXY"]
        );
        assert_eq!(
            beyond("GRANT EXECUTE ON PROCEDURE `cloud`.`p` TO `u`@`%`"),
            ["EXECUTE"]
        );
        let Some(Grant::Privileges { on, .. }) = parse("GRANT SELECT ON `c``d`.`t` TO `u`@`%`")
        else {
            panic!("not read")
        };
        assert_eq!(on.database, Name::Named("c`d".into()));
        assert_eq!(
            beyond("GRANT USAGE ON *.* TO `u`@`%` REQUIRE SSL WITH MAX_QUERIES_PER_HOUR 10"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn mysql_lines() {
        // MySQL 5.7 quotes with single quotes; MySQL 8 with backticks, lists dynamic
        // privileges without spaces and shows role grants with the role's host.
        assert_eq!(
            beyond("GRANT SELECT, INSERT, UPDATE ON `cloud`.* TO 'x'@'%'"),
            ["INSERT", "UPDATE"]
        );
        assert_eq!(
            beyond("GRANT USAGE ON *.* TO 'cksdrift'@'10.0.0.%'"),
            Vec::<String>::new()
        );
        assert_eq!(
            parse("GRANT `reader`@`%`,`other`@`localhost` TO `cksdrift`@`%`"),
            Some(Grant::Roles {
                roles: vec![
                    account("reader", Some("%")),
                    account("other", Some("localhost"))
                ],
                to: account("cksdrift", Some("%"))
            })
        );
        assert_eq!(
            beyond(
                "GRANT BACKUP_ADMIN,BINLOG_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION"
            ),
            ["BACKUP_ADMIN", "BINLOG_ADMIN"]
        );
        assert_eq!(
            beyond(
                "GRANT SELECT (`id`, `uuid`), INSERT (`name`) ON `cloud`.`vm_instance` TO \
                 `cksdrift`@`%`"
            ),
            ["INSERT"]
        );
    }

    #[test]
    fn what_is_no_grant_line_is_none() {
        for line in [
            "",
            "REVOKE SELECT ON *.* FROM `u`@`%`",
            "GRANT SELECT ON `cloud` TO `u`@`%`",
            "GRANT SELECT (`id` ON `cloud`.`t` TO `u`@`%`",
            "GRANT USAGE ON *.* TO `u",
        ] {
            assert_eq!(parse(line), None, "{line}");
        }
    }

    #[test]
    fn select_access_follows_the_most_a_line_grants() {
        let grants: Vec<Grant> = [
            "GRANT USAGE ON *.* TO `u`@`%`",
            "GRANT SELECT (`id`, `UUID`) ON `cloud`.`vm_instance` TO `u`@`%`",
            "GRANT SELECT (`name`) ON `cloud`.`vm_instance` TO `u`@`%`",
            "GRANT SELECT ON `cloud`.`kubernetes_cluster` TO `u`@`%`",
            "GRANT INSERT ON `cloud`.`kubernetes_cluster_vm_map` TO `u`@`%`",
        ]
        .iter()
        .filter_map(|l| parse(l))
        .collect();
        assert_eq!(
            select_access(&grants, "cloud", "vm_instance"),
            Access::Columns(vec!["id".into(), "name".into(), "uuid".into()])
        );
        assert_eq!(
            select_access(&grants, "cloud", "kubernetes_cluster"),
            Access::Whole
        );
        assert_eq!(
            select_access(&grants, "cloud", "kubernetes_cluster_vm_map"),
            Access::None
        );
        let global = [parse("GRANT SELECT ON *.* TO `u`@`%`").unwrap()];
        assert_eq!(
            select_access(&global, "cloud", "vm_instance"),
            Access::Whole
        );
        let db = [parse("GRANT ALL PRIVILEGES ON `cloud`.* TO `u`@`%`").unwrap()];
        assert_eq!(select_access(&db, "cloud", "vm_instance"), Access::Whole);
        assert_eq!(select_access(&db, "other", "vm_instance"), Access::None);
    }
}
