#!/usr/bin/env python3
"""lint_e2e.py -- find shell assertions in the e2e tests that can never fail.

    tests/lint/lint_e2e.py FILE...     one "FILE:LINE: RULE: message" per finding;
                                       exit 1 if any, 2 on a usage error

The e2e cases (tests/e2e/lib.sh) run with `set -e`, and bash ignores under
set -e a negated command (`! grep ...`) and the first commands of a `&&`
chain.  So this parses each file as bash does (words and quotes, $( ),
here-documents, compound commands, functions) and, inside each case body
(the single-quoted second argument of test_expect_success, parsed on its
own), each function body, each $( ) and the file itself, reports:

  bang        a `!`-negated command that is not the last command of its
              body: nothing fails when it "fails" (use `refute CMD`); also
              inside loops, `if` branches and braces, where even the last
              line does not decide the body's status; and `! CMD && ...`,
              which stops quietly when CMD succeeds.  `! CMD || ...` (a
              condition) and `if`/`while`/`until` conditions are fine.
  dollar-q    `[[ $? ]]`, `[ $? ]`, `test $?`: always true (`$?` is
              never empty); compare the status instead.
  silent-loop `for ... in $(seq ...)` with a `break` in a case body: a
              readiness loop that falls through silently when time runs
              out (use wait_until COND TIMEOUT).
  grep-q      `CMD | grep -q ...`: grep exits at its first match and CMD,
              writing on, dies of SIGPIPE, which pipefail turns into a
              failure of the case (use `CMD | contains ...` from lib.sh).
  parse       the file (or a case body) is not valid shell.

The parser covers what test scripts use; it is not a full bash grammar (no
coproc, no extglob patterns, `case` items inside $( )).
"""
import bisect
import re
import sys

RESERVED = {"if", "then", "elif", "else", "fi", "for", "select", "in", "do",
            "done", "while", "until", "case", "esac", "{", "}", "function",
            "!", "time"}
OPS = ["&&", "||", ";;&", ";;", ";&", ";", "|&", "|", "&>>", "&>", "&",
       "(", ")"]
REDIRS = ["<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">&", ">|", ">"]
SPACE = " \t"


class ParseError(Exception):
    def __init__(self, line, msg):
        super().__init__(msg)
        self.line = line


class Tok:
    """kind: WORD, OP (also redirections), NL, EOF.  For a WORD: parts
    [(kind, text)] with kind sq (in '...'), dq (in "..."), lit, exp
    ($-expansion outside quotes); subst [(code, line)] for every $( ),
    `...` and <( ) in it; cond (the words of a [[ ]])."""

    def __init__(self, kind, value, line):
        self.kind, self.value, self.line = kind, value, line
        self.parts, self.subst, self.cond = [], [], None

    def plain(self):
        return all(k == "lit" for k, _ in self.parts)

    def __repr__(self):
        return "%s(%r)@%d" % (self.kind, self.value, self.line)


class Lexer:
    def __init__(self, src, line0=1, nl=None):
        self.s, self.i, self.line0 = src, 0, line0
        self.nl = nl if nl is not None else [m.start() for m in re.finditer("\n", src)]
        self.heredocs = []  # (delimiter, strip tabs) awaiting the next newline
        self.queue = []     # tokens lexed ahead (a here-document's delimiter)

    def line(self, pos=None):
        return self.line0 + bisect.bisect_left(self.nl, self.i if pos is None else pos)

    def err(self, msg, pos=None):
        raise ParseError(self.line(pos), msg)

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def tokens(self):
        out = []
        while True:
            t = self.next()
            out.append(t)
            if t.kind == "EOF":
                return out

    def next(self):
        if self.queue:
            return self.queue.pop(0)
        s = self.s
        while True:
            c = self.peek()
            if c in SPACE and c:
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.peek() not in ("\n", ""):
                    self.i += 1
            else:
                break
        line = self.line()
        if self.i >= len(s):
            return Tok("EOF", "", line)
        c = self.peek()
        if c == "\n":
            self.i += 1
            self.read_heredocs()
            return Tok("NL", "\n", line)
        for op in REDIRS:
            if s.startswith(op, self.i):
                if op in ("<", ">") and self.peek(1) == "(":
                    break  # <( ) process substitution: a word
                self.i += len(op)
                t = Tok("OP", op, line)
                if op in ("<<", "<<-"):
                    self.heredoc_word(op == "<<-")
                return t
        if s.startswith("((", self.i):
            # (( arithmetic )), also in for (( )); else, as bash does, two (
            start = self.i
            try:
                return self.word(line)
            except ParseError:
                self.i = start + 1
                return Tok("OP", "(", line)
        for op in OPS:
            if s.startswith(op, self.i):
                self.i += len(op)
                return Tok("OP", op, line)
        return self.word(line)

    def heredoc_word(self, strip):
        while self.peek() in SPACE and self.peek():
            self.i += 1
        w = self.word(self.line())
        delim = "".join(t for _, t in w.parts)
        self.heredocs.append((delim, strip))
        self.queue.append(w)

    def read_heredocs(self):
        for delim, strip in self.heredocs:
            while True:
                if self.i >= len(self.s):
                    self.err("here-document ended by end of file, not %r" % delim)
                j = self.s.find("\n", self.i)
                j = len(self.s) if j < 0 else j
                text = self.s[self.i:j]
                self.i = min(j + 1, len(self.s))
                if (text.lstrip("\t") if strip else text) == delim:
                    break
        self.heredocs = []

    # --- words ---------------------------------------------------------
    def word(self, line):
        t = Tok("WORD", "", line)
        start = self.i
        if self.s.startswith("[[", self.i) and self.peek(2) in SPACE + "\n" and self.peek(2):
            return self.cond_word(t)
        if self.s.startswith("((", self.i):
            self.i += 2
            self.skip_parens(2)
            t.value = self.s[start:self.i]
            t.parts = [("lit", t.value)]
            return t
        self.word_chars(t, stop=SPACE + "\n;&|()<>")
        t.value = self.s[start:self.i]
        if not t.value:
            self.err("unexpected character %r" % self.peek())
        if self.peek() in ("<", ">") and self.peek() and self.peek(1) != "(" \
                and re.match(r"^([0-9]+|\{[A-Za-z_][A-Za-z_0-9]*\})$", t.value):
            return self.next()  # 2>FILE, {fd}>&2: the redirection itself
        return t

    def cond_word(self, t):
        """[[ ... ]] as one word; t.cond holds its words."""
        start = self.i
        self.i += 2
        t.cond = []
        while True:
            while self.peek() and (self.peek() in SPACE + "\n" or
                                   (self.peek() == "\\" and self.peek(1) == "\n")):
                self.i += 1
            if not self.peek():
                self.err("[[ without ]]", start)
            if self.s.startswith("]]", self.i) and (self.peek(2) == "" or self.peek(2) in SPACE + "\n;&|)"):
                self.i += 2
                break
            w = Tok("WORD", "", self.line())
            ws = self.i
            self.word_chars(w, stop=SPACE + "\n", cond=True)
            w.value = self.s[ws:self.i]
            t.cond.append(w)
            t.subst += w.subst
        t.value = self.s[start:self.i]
        t.parts = [("lit", t.value)]
        return t

    def word_chars(self, t, stop, cond=False):
        s = self.s
        lit = []

        def flush():
            if lit:
                t.parts.append(("lit", "".join(lit)))
                lit.clear()

        while self.i < len(s):
            c = s[self.i]
            if c in "<>" and s[self.i + 1:self.i + 2] == "(":  # <( ) >( )
                flush()
                j = self.i
                self.dollar(t)
                t.parts.append(("exp", s[j:self.i]))
                continue
            if c in stop:
                # a=( ... ): an array assignment belongs to the word
                if c == "(" and re.search(r"^[A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?\+?=$", "".join(lit)):
                    j = self.i
                    self.i += 1
                    self.skip_parens(1)
                    lit.append(s[j:self.i])
                    continue
                break
            if cond and s.startswith("]]", self.i) and (self.i + 2 >= len(s) or s[self.i + 2] in SPACE + "\n;&|)"):
                break
            if c == "\\":
                if s[self.i + 1:self.i + 2] == "\n":
                    self.i += 2
                else:
                    lit.append(s[self.i + 1:self.i + 2])
                    self.i += 2
            elif c == "'":
                flush()
                j = s.find("'", self.i + 1)
                if j < 0:
                    self.err("unterminated '...'", self.i)
                t.parts.append(("sq", s[self.i + 1:j]))
                self.i = j + 1
            elif c == '"':
                flush()
                t.parts.append(("dq", self.dquote(t)))
            elif c == "$" and s[self.i + 1:self.i + 2] == "'":
                flush()
                j = self.i + 2
                while j < len(s) and s[j] != "'":
                    j += 2 if s[j] == "\\" else 1
                if j >= len(s):
                    self.err("unterminated $'...'", self.i)
                t.parts.append(("sq", s[self.i + 2:j]))
                self.i = j + 1
            elif c == "$" or c == "`":
                flush()
                j = self.i
                self.dollar(t)
                t.parts.append(("exp", s[j:self.i]))
            else:
                lit.append(c)
                self.i += 1
        flush()

    def dquote(self, t):
        """Past a "...": its text with the quoting backslashes removed."""
        s = self.s
        start = self.i
        self.i += 1
        out = []
        while True:
            if self.i >= len(s):
                self.err('unterminated "..."', start)
            c = s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                n = s[self.i + 1:self.i + 2]
                if n == "\n":
                    pass
                elif n in '"\\$`':
                    out.append(n)
                else:
                    out.append("\\" + n)
                self.i += 2
            elif c == "$" or c == "`":
                j = self.i
                self.dollar(t)
                out.append(s[j:self.i])
            else:
                out.append(c)
                self.i += 1

    def dollar(self, t):
        """Past one $x, ${...}, $(( )), $( ), `...`, <( ) or >( )."""
        s = self.s
        c = s[self.i]
        if c == "`":
            j = self.i + 1
            while j < len(s) and s[j] != "`":
                j += 2 if s[j] == "\\" else 1
            if j >= len(s):
                self.err("unterminated `...`", self.i)
            t.subst.append((s[self.i + 1:j].replace("\\`", "`"), self.line()))
            self.i = j + 1
            return
        if c in "<>":  # <( ) >( )
            self.i += 2
            start, line = self.i, self.line()
            self.skip_code()
            t.subst.append((s[start:self.i - 1], line))
            return
        n = s[self.i + 1:self.i + 2]
        if s.startswith("$((", self.i):
            self.i += 3
            self.skip_parens(2)
        elif n == "(":
            self.i += 2
            start, line = self.i, self.line()
            self.skip_code()
            t.subst.append((s[start:self.i - 1], line))
        elif n == "{":
            self.i += 2
            depth = 1
            while depth:
                if self.i >= len(s):
                    self.err("unterminated ${...}")
                c = s[self.i]
                if c == "\\":
                    self.i += 2
                    continue
                if c == '"':
                    self.dquote(t)
                    continue
                if c == "$" or c == "`":
                    self.dollar(t)
                    continue
                depth += {"{": 1, "}": -1}.get(c, 0)
                self.i += 1
        else:
            m = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*|[0-9@*#?$!-])?").match(s, self.i)
            self.i = m.end()

    def skip_parens(self, close):
        """Past the end of an arithmetic (( )) / $(( )): CLOSE ')' at depth 0."""
        s = self.s
        depth = 0
        start = self.i
        while self.i < len(s):
            c = s[self.i]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    if s[self.i:self.i + close] == ")" * close:
                        self.i += close
                        return
                    if close == 1:
                        self.i += 1
                        return
                else:
                    depth -= 1
            elif c in "'\"":
                j = s.find(c, self.i + 1)
                self.i = j if j > 0 else self.i
            self.i += 1
        self.err("unterminated ((", start)

    def skip_code(self):
        """Past the ')' that closes the code of a $( ) (tokens, so quotes,
        here-documents and nested $( ) count)."""
        depth = 0
        sub = Lexer(self.s, self.line0, self.nl)
        sub.i = self.i
        while True:
            tk = sub.next()
            if tk.kind == "EOF":
                self.err("unterminated $(", self.i)
            if tk.kind == "OP" and tk.value == "(":
                depth += 1
            elif tk.kind == "OP" and tk.value == ")":
                if depth == 0:
                    self.i = sub.i
                    return
                depth -= 1


# --- parser ------------------------------------------------------------
class Node:
    def __init__(self, kind, line, **kw):
        self.kind, self.line = kind, line
        self.__dict__.update(kw)


class Parser:
    def __init__(self, toks):
        self.t, self.k = toks, 0

    def cur(self):
        return self.t[self.k]

    def take(self):
        tk = self.t[self.k]
        self.k += 1
        return tk

    def is_word(self, *vals):
        tk = self.cur()
        return tk.kind == "WORD" and tk.plain() and tk.value in vals

    def is_op(self, *vals):
        tk = self.cur()
        return tk.kind == "OP" and tk.value in vals

    def expect_word(self, val):
        if not self.is_word(val):
            raise ParseError(self.cur().line, "expected %r, found %r" % (val, self.cur().value))
        self.take()

    def skip_nl(self):
        while self.cur().kind == "NL":
            self.take()

    def at_end(self, ends):
        tk = self.cur()
        if tk.kind == "EOF":
            return True
        if tk.kind == "OP" and tk.value in ends:
            return True
        return tk.kind == "WORD" and tk.plain() and tk.value in ends

    def parse_list(self, ends=()):
        items = []
        while True:
            while self.cur().kind == "NL" or self.is_op(";", "&"):
                self.take()
            if self.at_end(ends):
                break
            items.append(self.parse_andor(ends))
            if self.cur().kind == "NL" or self.is_op(";", "&"):
                self.take()
            elif not self.at_end(ends):
                raise ParseError(self.cur().line, "unexpected %r" % self.cur().value)
        return Node("list", items[0].line if items else self.cur().line, items=items)

    def parse_andor(self, ends):
        pipes, ops = [self.parse_pipeline()], []
        while self.is_op("&&", "||"):
            ops.append(self.take().value)
            self.skip_nl()
            pipes.append(self.parse_pipeline())
        return Node("andor", pipes[0].line, pipes=pipes, ops=ops)

    def parse_pipeline(self):
        line = self.cur().line
        neg = False
        while self.is_word("!", "time"):
            if self.take().value == "!":
                neg = True
            while self.is_word("-p"):  # time -p
                self.take()
        cmds = [self.parse_command()]
        while self.is_op("|", "|&"):
            self.take()
            self.skip_nl()
            cmds.append(self.parse_command())
        return Node("pipeline", line, neg=neg, cmds=cmds)

    def redirs(self):
        while self.cur().kind == "OP" and self.cur().value in REDIRS + ["&>", "&>>"]:
            self.take()
            if self.cur().kind != "WORD":
                raise ParseError(self.cur().line, "redirection without a target")
            self.take()

    def parse_command(self):
        tk = self.cur()
        line = tk.line
        if tk.kind == "OP" and tk.value == "(":
            self.take()
            body = self.parse_list((")",))
            if not self.is_op(")"):
                raise ParseError(self.cur().line, "( without )")
            self.take()
            self.redirs()
            return Node("compound", line, what="subshell", lists=[("body", body)], words=[])
        if tk.kind != "WORD" and not (tk.kind == "OP" and tk.value in REDIRS + ["&>", "&>>"]):
            raise ParseError(line, "expected a command, found %r" % tk.value)
        if tk.kind == "WORD" and tk.plain() and tk.value in RESERVED:
            return self.parse_compound()
        words = []
        while True:
            tk = self.cur()
            if tk.kind == "WORD":
                words.append(self.take())
                if len(words) == 1 and self.is_op("(") and self.t[self.k + 1].kind == "OP" \
                        and self.t[self.k + 1].value == ")":
                    self.k += 2
                    self.skip_nl()
                    return Node("func", line, name=words[0].value, body=self.parse_command())
            elif tk.kind == "OP" and tk.value in REDIRS + ["&>", "&>>"]:
                self.redirs()
            else:
                break
        return Node("simple", line, words=words)

    def parse_compound(self):
        tk = self.take()
        line, w = tk.line, tk.value
        lists = []
        words = []
        if w in ("if",):
            lists.append(("cond", self.parse_list(("then",))))
            self.expect_word("then")
            lists.append(("body", self.parse_list(("elif", "else", "fi"))))
            while self.is_word("elif"):
                self.take()
                lists.append(("cond", self.parse_list(("then",))))
                self.expect_word("then")
                lists.append(("body", self.parse_list(("elif", "else", "fi"))))
            if self.is_word("else"):
                self.take()
                lists.append(("body", self.parse_list(("fi",))))
            self.expect_word("fi")
        elif w in ("while", "until"):
            lists.append(("cond", self.parse_list(("do",))))
            self.expect_word("do")
            lists.append(("body", self.parse_list(("done",))))
            self.expect_word("done")
        elif w in ("for", "select"):
            if self.cur().kind != "WORD":
                raise ParseError(line, "for without a name")
            name = self.take()
            words.append(name)
            self.skip_nl()
            if self.is_word("in"):
                self.take()
                while self.cur().kind == "WORD":
                    words.append(self.take())
            if self.is_op(";"):
                self.take()
            self.skip_nl()
            self.expect_word("do")
            lists.append(("body", self.parse_list(("done",))))
            self.expect_word("done")
        elif w == "case":
            if self.cur().kind != "WORD":
                raise ParseError(line, "case without a word")
            words.append(self.take())
            self.skip_nl()
            self.expect_word("in")
            while True:
                self.skip_nl()
                if self.is_word("esac"):
                    break
                if self.is_op("("):
                    self.take()
                while not self.is_op(")"):
                    if self.cur().kind == "EOF":
                        raise ParseError(line, "case without esac")
                    self.take()
                self.take()
                lists.append(("body", self.parse_list((";;", ";&", ";;&", "esac"))))
                if self.is_op(";;", ";&", ";;&"):
                    self.take()
            self.expect_word("esac")
        elif w == "{":
            lists.append(("body", self.parse_list(("}",))))
            self.expect_word("}")
        elif w == "function":
            name = self.take().value
            if self.is_op("("):
                self.take()
                if not self.is_op(")"):
                    raise ParseError(line, "function NAME ( without )")
                self.take()
            self.skip_nl()
            return Node("func", line, name=name, body=self.parse_command())
        else:
            raise ParseError(line, "unexpected %r" % w)
        self.redirs()
        return Node("compound", line, what=w, lists=lists, words=words)


# --- checks ------------------------------------------------------------
MSG = {
    "bang": "`! CMD` here cannot fail: set -e ignores a negated command unless it is "
            "the last line of its case, function or $( ) (use refute CMD ...)",
    "bang-and": "`! CMD && ...`: when CMD succeeds the chain just stops and "
                "set -e ignores it (use refute CMD, then the rest)",
    "dollar-q": "`[[ $? ]]` is always true ($? is never empty): save the status "
                "(st=$?) and compare it",
    "silent-loop": "this `for ... in $(seq ...)` loop breaks out when ready but "
                   "falls through silently when time runs out (use wait_until COND TIMEOUT)",
    "grep-q": "`CMD | grep -q`: grep exits at the first match and CMD, writing on, "
              "dies of SIGPIPE, which pipefail makes a failure (use CMD | contains ...)",
}


class Linter:
    def __init__(self):
        self.found = []  # (line, rule, message)
        self.in_case = 0  # inside a case body (silent-loop applies there)

    def report(self, line, rule, msg=None):
        self.found.append((line, rule, msg or MSG[rule]))

    def unit(self, code, line0):
        """Parse CODE (first line = line0) and check it as a body of its own."""
        try:
            toks = Lexer(code, line0).tokens()
            tree = Parser(toks).parse_list()
        except ParseError as e:
            self.report(e.line, "parse", "not valid shell: %s" % e)
            return
        except RecursionError:
            self.report(line0, "parse", "nested too deeply")
            return
        self.walk_list(tree, top=True, cond=False)

    def walk_list(self, lst, top, cond):
        n = len(lst.items)
        for i, ao in enumerate(lst.items):
            self.walk_andor(ao, last=top and i == n - 1, cond=cond)

    def walk_andor(self, ao, last, cond):
        n = len(ao.pipes)
        for j, p in enumerate(ao.pipes):
            op = ao.ops[j] if j < n - 1 else None
            if p.neg and not cond and not last:
                if op == "&&":
                    self.report(p.line, "bang", MSG["bang-and"])
                elif op is None:
                    self.report(p.line, "bang")
            # set -e is off for the commands of a negated pipeline and of
            # every pipeline of a chain but the last
            for c in p.cmds[1:]:
                if c.kind == "simple" and quiet_grep(c.words):
                    self.report(c.line, "grep-q")
            for c in p.cmds:
                self.walk_cmd(c, cond or p.neg or j < n - 1)

    def walk_cmd(self, c, cond):
        if c.kind == "func":
            self.walk_cmd_top(c.body)
            return
        for w in c.words:
            self.word(w)
        if c.kind == "simple":
            self.simple(c)
            return
        if self.in_case and c.what == "for" and any("$(seq" in w.value for w in c.words[1:]) \
                and any(self.breaks(l) for _, l in c.lists):
            self.report(c.line, "silent-loop")
        for role, lst in c.lists:
            self.walk_list(lst, top=False, cond=cond or role == "cond")

    def walk_cmd_top(self, body):
        """A function's body: its list is a top-level body."""
        if body.kind == "compound" and body.what in ("{", "subshell"):
            for w in body.words:
                self.word(w)
            self.walk_list(body.lists[0][1], top=True, cond=False)
        else:
            self.walk_cmd(body, cond=False)

    def breaks(self, lst):
        for ao in lst.items:
            for p in ao.pipes:
                for c in p.cmds:
                    if c.kind == "simple" and c.words and c.words[0].value == "break":
                        return True
                    if c.kind == "compound" and c.what not in ("for", "while", "until", "select") \
                            and any(self.breaks(l) for _, l in c.lists):
                        return True
        return False

    def word(self, w):
        for code, line in w.subst:
            self.unit(code, line)

    def simple(self, c):
        words = [w for w in c.words if not re.match(r"^[A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?\+?=", w.value)]
        if not words:
            return
        first = words[0]
        vals = [w.value.strip('"') for w in words]
        if first.cond is not None:
            cv = [w.value.strip('"') for w in first.cond]
            if cv in (["$?"], ["-n", "$?"]):
                self.report(first.line, "dollar-q")
        elif vals in (["[", "$?", "]"], ["[", "-n", "$?", "]"], ["test", "$?"], ["test", "-n", "$?"]):
            self.report(first.line, "dollar-q")
        if first.value in ("test_expect_success", "test_expect_failure") and len(words) >= 3:
            body = words[2]
            self.in_case += 1
            self.unit(case_text(body), body.line)
            self.in_case -= 1


def quiet_grep(words):
    """grep (egrep, fgrep) with -q, --quiet or --silent among its options."""
    if not words or words[0].value.split("/")[-1] not in ("grep", "egrep", "fgrep"):
        return False
    for w in words[1:]:
        v = w.value
        if v == "--":
            break
        if v in ("--quiet", "--silent") or re.match(r"^-[A-Za-z]*q[A-Za-z]*$", v):
            return True
    return False


def case_text(w):
    """The text of a case body word: what eval will see, with any expansion
    outside quotes (a value spliced in, as in '...'$how'...') replaced by X."""
    out = []
    for kind, text in w.parts:
        if kind == "exp":
            out.append("X")
        else:
            out.append(text)
    return "".join(out)


def lint_file(path):
    try:
        src = open(path, encoding="utf-8").read()
    except OSError as e:
        return [(0, "parse", "cannot read: %s" % e.strerror)]
    li = Linter()
    li.unit(src, 1)
    return sorted(set(li.found))


def main(argv):
    if len(argv) < 2:
        print("usage: lint_e2e.py FILE...", file=sys.stderr)
        return 2
    bad = 0
    for path in argv[1:]:
        for line, rule, msg in lint_file(path):
            print("%s:%d: %s: %s" % (path, line, rule, msg))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
