"""When a new statement gives another value for what a fact says there is only one of.

"The user lives in Berlin" contradicts "The user lives in Porto": the same subject and a
single-valued relation (where someone lives, works, their doctor, their age) with another value.
Learning uses it to supersede an older fact even when the model forgot to say "update"
(:mod:`hermes.learn.consolidate`); the user's own statements use it so that a second "remember
that my doctor is Dr. Jones" replaces the first instead of leaving both active
(:meth:`hermes.memory.facts.store.FactStore.add` with ``supersede``, through :func:`replaced`).
Words kept as the user said them (``The user said: "I live in Porto"``) are read inside their
quotes, in the first person.

A statement is read clause by clause ("I left Acme and joined Globex") into :class:`Claim`\\ s.
The family of ways people say that something changed is read as such: a change adverb ("I'm
now at Globex", "I now live in Porto"), a new one ("my new doctor is Dr. Jones", "I have a new
phone, a Pixel 8", "Dr. Jones is my new doctor"), a move or a switch ("I moved from Lisbon to
Porto", "I switched to Neovim", "I turned 35"), and an end ("I no longer work at Acme", "I'm
not at Acme anymore", "I left Acme", "I quit Acme", "Dr. Smith isn't my doctor any more"). An
end names the value it retires: it replaces the fact that has that value. "I switched to X"
does not say of what: it replaces the one fact of a relation X can be a value of (an employer,
an editor, a phone...), and nothing when the user has several. A user's explicit "no longer"
said of anything else ("I don't eat meat anymore") replaces the fact it negates, word for word
(:func:`replaced` only: learning's own statements never).

Rules only: a relation they do not know is never a contradiction (both facts stay), and
neither is a statement that does not name a new value of the relation's kind
(:func:`_names_a_value`): "my doctor is on holiday until March" names no other doctor, "my car
is in the garage until Friday" no other car, "I moved to a desk near the window at work" no
other home, "I work at home on Fridays" no other employer, "I'm at the gym now" no employer.
A passing state, a part-time or temporary qualifier, an addition ("I also work at Globex", "a
second job"), or a value of another kind keeps both facts; where the rules are unsure, both
stay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hermes.memory.facts.statement import VERBATIM_PREFIX, is_verbatim

# Words between a subject and its verb, or an auxiliary and its verb, that say "this is the
# new state" ("I now live", "I'm currently working", "I have just moved").
_ADV = (r"(?:(?:now|currently|recently|just|already|finally|officially|actually|still|"
        r"presently)\s+)*")
# Kinds of relation_is (after "'s"): one of each at a time.
_WHAT = (r"favou?rite\s+\w+(?:\s+\w+)?|manager|boss|employer|company|workplace|partner|wife|"
         r"husband|girlfriend|boyfriend|birthday|email(?: address)?|phone number|job title|"
         r"title|role|team|home city|city|address|car|laptop|phone|editor|shell|browser|bank|"
         r"os|operating system|dentist|doctor|gp|therapist|vet|landlord|lawyer|accountant|"
         r"hairdresser|gym|school|university")
_PARTNER = frozenset({"partner", "wife", "husband", "girlfriend", "boyfriend"})
# relation_is kinds that are another relation's: "my new employer is Globex" is works_at.
_ALIASES = {"employer": "works_at", "company": "works_at", "workplace": "works_at",
            "city": "lives_in", "home city": "lives_in"}


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


# Relations a subject has only one of at a time. A new value replaces the old one. The verbs
# take the first person too ("I live in", "I am working at"): the user's own words.
_SINGLE_VALUED: list[tuple[str, re.Pattern[str]]] = [
    # (first: "my new job is at Globex" is not "<my new job> is at Globex")
    ("works_at", _p(
        r"^(?P<subject>.+?)'s?\s+(?:new\s+|current\s+)?(?:job|work|workplace|office)\s+is\s+"
        rf"{_ADV}(?:at|with|for)\s+(?P<value>.+)$")),
    ("lives_in", _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have|is|am|are)\s+{_ADV})?(?:lives|live|living|"
        r"resides|reside|based|moved|relocated)\s+(?:back\s+|house\s+|home\s+)?"
        r"(?:(?:from\s+(?P<old>.+?)\s+)?to|in)\s+(?P<value>.+)$")),
    ("works_at", _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have|is|am|are)\s+{_ADV})?(?:(?:started|begun|began)\s+)?"
        r"(?:works|work|working|employed)\b[^.]*?\s(?:at|for|by)\s+(?P<value>.+)$")),
    # "I'm now at Globex": an employer, most likely; loose ("~"): only what the user says
    # outright is read so (:func:`replaced`), never learning's "Caroline is at Harvard"
    ("works_at~", _p(rf"^(?P<subject>.+?)\s+{_ADV}(?:is|am|are)\s+{_ADV}at\s+(?P<value>.+)$")),
    # "I started at Globex", "I got a new job at Globex", "I joined Globex", "I switched jobs
    # to Globex"
    ("works_at", _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:"
        r"(?:(?:has|have)\s+)?(?:started|begun|began)\s+(?:(?:a\s+)?(?:new\s+)?"
        r"(?:job|position|role)\s+)?(?:at|with)|"
        r"(?:(?:has|have)\s+)?(?:got|found|taken|took|accepted|landed|started)\s+(?:a\s+)?"
        r"(?:new\s+)?(?:job|position|role)\s+(?:at|with)|"
        r"(?:has|have)\s+(?:got\s+)?a\s+new\s+(?:job|position|role)\s+(?:at|with)|"
        r"(?:(?:has|have)\s+)?(?:switched|changed)\s+(?:jobs|employers|companies)\s+"
        r"(?:(?:from\s+(?P<old>.+?)\s+)?to)|"
        r"(?:(?:has|have)\s+)?joined)\s+(?P<value>.+)$")),
    ("relation_is", _p(
        rf"^(?P<subject>.+?)'s?\s+(?:(?:current|new)\s+)?(?P<what>{_WHAT})\s+"
        rf"(?:is|are|has\s+changed\s+to|changed\s+to|has\s+become|became)\s+{_ADV}"
        r"(?P<value>.+)$")),
    # "I switched banks to Monzo", "I changed doctors to Dr. Kim"
    ("relation_is", _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+)?(?:switched|changed)\s+"
        rf"(?P<what>{_WHAT})s?\s+(?:(?:from\s+(?P<old>.+?)\s+)?to)\s+(?P<value>.+)$")),
    # "I have a new doctor, Dr. Jones", "I got a new phone: a Pixel 8"
    ("relation_is", _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:has|have|got|has\s+got|have\s+got|bought|found)\s+"
        rf"(?:a\s+)?new\s+(?P<what>{_WHAT})\s*(?:[,:]|\s-|\s—|\s+(?:called|named))\s*"
        r"(?P<value>.+)$")),
    # "Dr. Jones is my new doctor"
    ("relation_is", _p(
        rf"^(?P<value>.+?)\s+is\s+{_ADV}(?P<subject>.+?)'s?\s+(?:(?:current|new)\s+)?"
        rf"(?P<what>{_WHAT})$")),
    ("age", _p(
        rf"^(?P<subject>.+?)\s+(?:is|am)\s+{_ADV}(?P<value>\d+)(?:\s+years?\s+old)?(?:\s+now)?$")),
    ("age", _p(r"^(?P<subject>.+?)\s+(?:is|am)\s+(?P<value>\d+)\s+years?\s+old\b")),
    ("age", _p(rf"^(?P<subject>.+?)\s+{_ADV}(?:has\s+|have\s+)?turned\s+(?P<value>\d+)\b")),
]
# Relations whose value an unqualified "switched to X" may be: which one, the stored facts say.
_THINGS = ("relation_is:editor", "relation_is:shell", "relation_is:browser", "relation_is:os",
           "relation_is:operating system", "relation_is:laptop", "relation_is:phone",
           "relation_is:car", "relation_is:bank", "relation_is:gym")
_PEOPLE = ("relation_is:doctor", "relation_is:gp", "relation_is:dentist",
           "relation_is:therapist", "relation_is:vet", "relation_is:hairdresser",
           "relation_is:lawyer", "relation_is:accountant")
# (what it may be about, whether a change word is needed, the pattern)
_OPEN: list[tuple[frozenset[str], bool, re.Pattern[str]]] = [
    (frozenset({"works_at", *_THINGS, *_PEOPLE}), False, _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+)?(?:switched|changed|moved\s+over|"
        r"went\s+over|gone\s+over|made\s+the\s+switch)\s+(?:(?:from\s+(?P<old>.+?)\s+)?to)\s+"
        r"(?P<value>.+)$")),
    # "I now use Neovim", "I'm using Firefox now" (a change adverb is needed: see _use_changed)
    (frozenset(_THINGS), True, _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:is|am|are)\s+{_ADV})?(?:use|uses|using)\s+"
        r"(?P<value>.+)$")),
]
# After an end's name: where to ("for Globex", "to Porto", "to live in Porto") or what came next
# ("and joined Globex"); "for a weekend in Paris", "to visit my parents" stay in the value (a
# trip: :func:`_ends_a_name` refuses it).
_END_REST = (r"(?:\s+(?:for|to)\s+(?=(?-i:[A-Z])|(?:a\s+new|good|live|move|work|join|start|"
             r"study)\b).+|\s+and\s+.+)?")
# An end: the value it names is no longer the relation's (no new value needed).
_ENDS: list[tuple[frozenset[str], re.Pattern[str]]] = [
    (frozenset({"works_at", "lives_in"}), _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+{_ADV})?left\s+(?P<value>.+?)"
        rf"{_END_REST}$")),
    (frozenset({"works_at"}), _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+{_ADV})?(?:quit|resigned\s+from|"
        r"retired\s+from|stopped\s+working\s+(?:at|for)|(?:was|got|has\s+been|have\s+been)\s+"
        r"(?:laid\s+off|let\s+go|fired|made\s+redundant)\s+(?:from|by|at))\s+(?P<value>.+?)"
        rf"{_END_REST}$")),
    (frozenset({"lives_in"}), _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+{_ADV})?(?:moved|relocated)\s+"
        r"(?:out\s+of|away\s+from)\s+(?P<value>.+?)(?:\s+(?:for|to|and)\s+.+)?$")),
    (frozenset(f"relation_is:{p}" for p in _PARTNER), _p(
        rf"^(?P<subject>.+?)\s+{_ADV}(?:(?:has|have)\s+{_ADV})?(?:broke\s+up\s+with|"
        r"split\s+up\s+with|separated\s+from|divorced)\s+(?P<value>.+)$")),
]
# Saying the opposite: removed before the frames read the clause, and the claim negated.
_NEGATIONS = [
    (_p(r"\b(is|am|are)\s+no\s+longer\b"), r"\1"),
    (_p(r"\bno\s+longer\s+"), ""),
    (_p(r"\b(is|am|are)\s+not\b"), r"\1"),
    (_p(r"\b(is|are)n['’]t\b"), r"\1"),
    (_p(r"\b(?:does|do)\s+not\s+|\b(?:doesn|don)['’]?t\s+"), ""),
    (_p(r"\b(?:has|have)\s+stopped\s+|\bstopped\s+(?=working|living)"), ""),
    (_p(r"\s*\b(?:any\s?more|any\s+longer)\b"), ""),
]
# The first person of words kept as said, as the subject the rules read ("I", "my").
_FIRST_PERSON = [
    (_p(r"^(?:I'm|I’m)\s+"), "the user am "),
    (_p(r"^(?:I've|I’ve)\s+"), "the user have "),
    (_p(r"^I\s+"), "the user "),
    (_p(r"^my\s+"), "the user's "),
]
_MY = _p(r"(?<![\w'’])my(?![\w'’])")

# A passing state or a part-time / temporary qualifier: the statement is no new value.
_PASSING = re.compile(
    r"\b(?:until|till|til|through|for\s+now|for\s+the\s+(?:time\s+being|week|weekend|day|"
    r"month|summer|winter|holidays?)|for\s+(?:a|an|one|two|three|four|five|six|seven|eight|"
    r"nine|ten|eleven|twelve|several|a\s+few|a\s+couple\s+of|some|\d+)\s+"
    r"(?:days?|weeks?|months?|nights?)|this\s+(?:week|weekend|month|year|morning|afternoon|"
    r"evening|summer|winter)|today|tonight|tomorrow|temporar\w*|part[- ]time|"
    r"on\s+(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends?|"
    r"weekdays)|at\s+(?:the\s+)?weekends?|sometimes|occasionally|some\s+days|once\s+a|"
    r"twice\s+a|(?:one|two|three|four)\s+days?\s+a\s+week|every\s+(?:other|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|on\s+(?:holiday|vacation|leave|sick\s+leave|"
    r"a\s+trip|a\s+break|strike)|also|as\s+well|too|on\s+the\s+side)\b", re.I)
# What the user says that adds to a fact or is not so yet: no change of it ("a second job", "a
# side gig", "my other doctor", "I'm joining Globex next month"). Read in new statements only: a
# stored fact's "two other people" still says where the user lives.
_ADDED = re.compile(r"\b(?:second|side|another|other|extra|both|in\s+addition|additionally|"
                    r"next\s+(?:week|month|year)|soon|will|going\s+to)\b", re.I)
# A value opening with one of these is a state or a place inside something, not a value:
# "is on holiday", "is in the garage", "is being repaired", "is broken".
_STATE_START = frozenset({
    "on", "in", "at", "off", "out", "away", "back", "under", "with", "without", "from", "to",
    "into", "by", "near", "over", "still", "not", "no", "being", "getting", "sick", "ill",
    "busy", "broken", "closed", "late", "unavailable", "retiring", "leaving", "moving",
    "going", "having", "doing", "very", "really", "so", "too", "always", "never"
})
# Possessives, determiners and pronouns: "moved to a desk", "work for myself", "my flat".
_NO_NAME_START = frozenset({
    "a", "an", "my", "our", "his", "her", "their", "your", "its", "this", "that", "these",
    "those", "another", "some", "any", "myself", "ourselves", "himself", "herself",
    "themselves", "home", "work", "bed", "here", "there", "somewhere", "remotely"
})
# A place within a home or an employer, not another one: "the Lisbon office", "a desk".
_INSIDE = re.compile(r"\b(?:office|desk|branch|site|campus|building|floor|room|window|hq|"
                     r"headquarters|home|remote(?:ly)?|shift|department)\b", re.I)
_TITLES = frozenset({
    "dr", "dr.", "dra", "dra.", "doctor", "mr", "mr.", "mrs", "mrs.", "ms", "ms.", "mx", "miss",
    "prof", "prof.", "professor", "st", "st.", "sr", "sr.", "sra", "sra.", "jr", "jr."
})
# Kinds of relation_is whose value is a person (or an organisation): a name or a title.
_PERSON = frozenset({"manager", "boss", "partner", "wife", "husband", "girlfriend",
                     "boyfriend", "dentist", "doctor", "gp", "therapist", "vet", "landlord",
                     "lawyer", "accountant", "hairdresser"})
# Capitalised words that describe a person rather than name one: "my partner is Spanish" is
# no other partner (a person's name that is also one of these is left unread: both stay).
_DESCRIBES_A_PERSON = frozenset("""
    american argentinian australian austrian belgian brazilian british canadian chilean
    chinese colombian croatian cuban czech danish dutch egyptian english european filipino
    finnish french german greek hungarian indian indonesian iranian irish israeli italian
    jamaican japanese kenyan korean lebanese mexican moroccan nigerian norwegian pakistani
    peruvian polish portuguese romanian russian scottish serbian slovak spanish swedish swiss
    thai turkish ukrainian venezuelan vietnamese welsh african asian latino latina
    catholic christian protestant jewish muslim hindu buddhist sikh atheist agnostic
    """.split())  # noqa: SIM905 - a word list reads better as text
# Things named by a brand or model: "a Tesla Model 3", "an iPhone 15", "a ThinkPad".
_THING = frozenset({"car", "laptop", "phone"})
# Words that describe a thing rather than name another one: "my car is an EV", "my gym is
# 24/7", "my shell is slow", "my laptop is a 2019 model", "my bank is UK-based".
_DESCRIBES_A_THING = frozenset("""
    ev evs electric hybrid diesel petrol automatic manual new old older newer slow fast quick
    outdated old-fashioned broken cheap expensive free open closed 24/7 big small great good
    bad fine ok okay model version edition one update updated refurbished second-hand used
    leased rented online mobile local
    """.split())  # noqa: SIM905 - a word list reads better as text
_YEAR = re.compile(r"^(?:19|20)\d\d$")
# Well-known names and what they are, for an open "I switched to X", which says not of what:
# the relations it may be about are the name's kinds; "other" names none of them ("I switched
# to Spotify" retires no phone, "to Python 3" no editor, "to Monzo" no employer). A name not
# listed may be any of them (the stored facts decide: see :func:`replaced`).
_KNOWN_NAMES: dict[str, frozenset[str]] = {}
for _kind, _names in (
    ("editor", "vim neovim nvim emacs vscode vs-code sublime atom helix nano intellij pycharm "
               "webstorm zed cursor xcode notepad++ kakoune"),
    ("shell", "bash zsh fish powershell nushell tcsh ksh xonsh"),
    ("browser", "firefox chrome chromium safari edge brave opera vivaldi arc"),
    ("os", "linux ubuntu debian fedora windows macos osx ios android mint manjaro"),
    ("operating system", "linux ubuntu debian fedora windows macos osx ios android mint "
                         "manjaro"),
    ("phone", "iphone pixel galaxy samsung oneplus xiaomi nokia motorola android fairphone "
              "huawei"),
    ("laptop", "macbook thinkpad xps surface chromebook framework dell lenovo asus"),
    ("car", "tesla toyota honda ford bmw audi volkswagen vw skoda renault peugeot fiat kia "
            "hyundai volvo nissan mazda mercedes subaru prius polestar"),
    ("bank", "monzo revolut barclays hsbc lloyds natwest santander chase n26 starling "
             "nationwide halifax citi citibank"),
    ("other", "spotify tidal deezer netflix youtube hulu disney+ python rust java javascript "
              "typescript golang kotlin swift ruby php haskell scala elixir notion obsidian "
              "evernote slack teams whatsapp signal telegram discord decaf tea coffee oat soy "
              "almond vegan vegetarian keto"),
):
    for _name in _names.split():
        _KNOWN_NAMES[_name] = _KNOWN_NAMES.get(_name, frozenset()) | {f"relation_is:{_kind}"}
del _kind, _names, _name


def _known_kinds(value: str) -> frozenset[str] | None:
    """The relations a well-known name (``value``'s first word past an article) is a value of,
    or None for a name not listed."""
    words = value.casefold().split()
    if words and words[0] in ("a", "an", "the"):
        words = words[1:]
    if not words:
        return None
    kinds = _KNOWN_NAMES.get(words[0].strip(".,!"))
    if kinds is None:
        return None
    return frozenset(k for k in kinds if k != "relation_is:other")
# Where one clause ends and another begins: "I left Acme and joined Globex", "I left Acme; I'm
# at Globex now", "I left Acme. I'm at Globex now" (never inside a name: "Johnson and
# Johnson", "Dr. Jones").
_CLAUSE = re.compile(r"\s*;\s*|\s*[.!](?:\s+|$)|,\s+(?=I\b|I['’]|my\b|(?:and|but|so|then|now|"
                     r"moved|joined|left|quit|started|switched)\b)|"
                     r"\s+(?:and|but|so|then)\s+(?=I\b|I['’]|[a-z])")
# Words that open a clause with no subject of its own: "... and joined Globex".
_VERB_START = _p(r"^(?:now\s+|then\s+|also\s+|just\s+|recently\s+)*(?:moved|joined|left|quit|"
                 r"started|switched|changed|got|took|turned|relocated|live|lives|work|works|"
                 r"am|is|have|has|use|uses|bought|found|retired|resigned|no\s+longer|"
                 r"do|does|don['’]t|doesn['’]t)\b")


@dataclass(frozen=True)
class Claim:
    """What one clause says of a single-valued relation."""

    relations: frozenset[str]   # one, or what an open "switched to X" may be about
    subject: str                # normalised: "user" for the user
    value: str                  # normalised; for an end, the value it ends
    old: str | None = None      # the value it says it replaces ("from Vim to Neovim")
    ended: bool = False         # "no longer", "not ... anymore", "left", "quit"
    loose: bool = False         # the relation is likely, not said ("I'm now at Globex")
    open: bool = False          # "switched to X": the relation is X's kind, not said

    @property
    def definite(self) -> bool:
        """Whether the words alone say which relation (not an open "switched to X", not a
        loose "is at X")."""
        return not self.loose and (self.old is not None or self.ended
                                   or len(self.relations) == 1 and not self.open)


def _named(word: str) -> bool:
    """A name's word: a capital anywhere ("Porto", "iPhone") or a digit."""
    return any(c.isupper() or c.isdigit() for c in word)


def _names_a_value(relation: str, value: str) -> bool:
    """Whether ``value`` (as said, case kept) is a new value of ``relation``'s kind: a place
    to live, an employer, a person, a thing. Unsure: no."""
    if _PASSING.search(value):
        return False
    words = value.split()
    if not words:
        return False
    first = words[0].casefold()
    if relation in ("lives_in", "works_at"):
        if first in _NO_NAME_START or _INSIDE.search(value) or first in _STATE_START:
            return False
        if first == "the":      # "the Netherlands", "the BBC"; not "the office"
            return len(words) > 1 and _named(words[1])
        return _named(words[0])
    if relation == "age":
        return True
    what = relation.partition(":")[2]
    if first in _STATE_START and what != "birthday":      # "my birthday is on 5 May"
        return False
    if what in _PERSON:
        if all(w.casefold().strip(".,!") in _DESCRIBES_A_PERSON for w in words):
            return False    # "my partner is Spanish", "my doctor is Portuguese"
        return first in _TITLES or _named(words[0])
    if f"relation_is:{what}" in _THINGS:
        named = [w.casefold().strip(".,!") for w in words if w.casefold() not in ("a", "an", "the")]
        if named and all(w in _DESCRIBES_A_THING or _YEAR.match(w) or w.endswith("-based")
                         for w in named):
            return False    # "my car is an EV", "my gym is 24/7", "my bank is UK-based"
    if what in _THING:
        if first in ("a", "an", "the"):
            return len(words) > 1 and _named(words[1])
        return _named(words[0])
    return True


# What may follow the name an end retires: when it ended ("I left Acme in March", "... two
# years ago"), nothing else ("I left Lisbon at 6am", "I left Acme early", "by train").
_END_TAIL = re.compile(
    r"^(?:(?:in|since)\s+(?:\d{4}|january|february|march|april|may|june|july|august|september|"
    r"october|november|december)\b.*|last\s+(?:week|month|year|spring|summer|autumn|fall|"
    r"winter)|(?:a|an|one|two|three|four|five|six|\d+|a\s+few|several)\s+(?:weeks?|months?|"
    r"years?)\s+ago|recently|)$", re.I)


def _end_name(value: str) -> str | None:
    """The name an end's ``value`` (as said) retires, when it is a name and nothing but when
    it ended: "Acme", "the BBC", "Acme" of "Acme in March"; None for "Lisbon at 6am", "Acme's
    party early", "Acme early"."""
    words = value.split()
    start = 1 if words and words[0].casefold() == "the" else 0
    words = words[start:]
    count = 0
    while count < len(words) and _named(words[count]) and not \
            re.search(r"['’]s?$", words[count]):
        count += 1
    if count < len(words) and re.search(r"['’]s?$", words[count]) and _named(words[count]):
        return None     # "Acme's gym": a thing of Acme's
    if count == 0 or not _END_TAIL.match(" ".join(words[count:])):
        return None
    return " ".join(value.split()[:start + count])


# "now Dr. Jones", "currently Globex": the value, not the word saying it is the new one; "Globex
# now", "Porto these days": nor the word after it.
_NOW = re.compile(r"^(?:now|currently|actually|still)\s+", re.I)
_CHANGED = re.compile(r"\b(?:now|currently|these\s+days|nowadays|instead)\b", re.I)
_NOW_AFTER = re.compile(r"\s+(?:now|currently|these\s+days|nowadays|instead)$", re.I)


def norm(text: str) -> str:
    """Lower case, "favorite" as "favourite", punctuation but apostrophes as spaces."""
    text = re.sub(r"\bfavorite\b", "favourite", text.casefold())
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", text)).strip()


def _said(content: str) -> str:
    """A statement kept in the user's words, as the words themselves."""
    if not (is_verbatim(content) and content.endswith('"')):
        return content
    return content[len(VERBATIM_PREFIX) + 1:-1].strip()


def _as_user(clause: str) -> str:
    """A clause in the first person, as a statement about "the user"."""
    for pattern, subject in _FIRST_PERSON:
        if pattern.match(clause):
            clause = pattern.sub(subject, clause, count=1)
            break
    return _MY.sub("the user's", clause)


def clauses(content: str) -> list[str]:
    """``content``'s clauses, each with a subject ("I left Acme and joined Globex": "the user
    left Acme", "the user joined Globex")."""
    text = _said(content).strip()
    parts: list[str] = []
    position = 0
    for match in _CLAUSE.finditer(text):
        before = text[position:match.start()]
        last = before.rsplit(None, 1)[-1].casefold() if before.split() else ""
        if match.group().strip().startswith(".") and (
                last in _TITLES or last.rstrip(".") in _TITLES or len(last) == 1):
            continue    # "Dr. Jones", "J. Smith": no clause ends there
        parts.append(before)
        position = match.end()
    parts.append(text[position:])
    out: list[str] = []
    for part in (re.sub(r"^(?:and|but|so|then)\s+", "", p.strip()).rstrip(".!") for p in parts):
        if not part:
            continue
        part = _as_user(part)
        if out and _VERB_START.match(part) and out[-1].casefold().startswith("the user "):
            part = f"the user {part}"       # "... and joined Globex": the user did
        out.append(part)
    return out


def _negated(clause: str) -> tuple[str, bool]:
    """The clause without its negation, and whether it had one."""
    said = clause
    for pattern, replacement in _NEGATIONS:
        clause = pattern.sub(replacement, clause)
    return re.sub(r"\s+", " ", clause).strip(), clause != said


def _subject(match: re.Match[str]) -> str:
    subject = norm(match.group("subject"))
    return "user" if subject == "the user" else subject


def _value(text: str) -> str:
    return _NOW_AFTER.sub("", _NOW.sub("", text.strip()))


def _claim(clause: str) -> Claim | None:
    """The clause's claim about a single-valued relation, or None."""
    for relations, pattern in _ENDS:
        match = pattern.match(clause)
        if match:
            name = _end_name(_value(match.group("value")))
            if _PASSING.search(clause[match.end("subject"):]) or name is None:
                return None     # "I left Lisbon this morning", "I left Acme's party early"
            return Claim(relations, _subject(match), norm(name), ended=True)
    clause, ended = _negated(clause)
    for name, pattern in _SINGLE_VALUED:
        match = pattern.match(clause)
        if not match:
            continue
        relation, loose = name.rstrip("~"), name.endswith("~")
        if "what" in match.groupdict():
            what = re.sub(r"^(?:current|new)\s+", "", norm(match.group("what")))
            relation = _ALIASES.get(what, f"{name}:{what}")
        value = _value(match.group("value"))
        rest = clause[match.end("subject"):] if match.start("subject") == 0 else clause
        if ended and relation in ("lives_in", "works_at"):
            value = _end_name(value) or ""
        if ended and (_PASSING.search(rest) or not value):
            return None     # "I don't work at Acme on Fridays anymore": a passing state
        if ended:
            return Claim(frozenset({relation}), _subject(match), norm(value), ended=True,
                         loose=loose)
        if _PASSING.search(rest) or not _names_a_value(relation, value):
            return None     # a state, a qualifier, another kind: no value to replace
        old = match.groupdict().get("old")
        return Claim(frozenset({relation}), _subject(match), norm(value),
                     norm(old) if old else None, loose=loose)
    if ended:
        return None
    for relations, needs_change, pattern in _OPEN:
        match = pattern.match(clause)
        if not match:
            continue
        value = _value(match.group("value"))
        rest = clause[match.end("subject"):]
        if _PASSING.search(rest) or not any(_named(w) or w.casefold() in _TITLES
                                            for w in value.split()[:2]):
            return None
        if needs_change and not _CHANGED.search(rest):
            return None     # "I use Firefox" may be one of several; "I now use it" a change
        kinds = frozenset(r for r in relations if _names_a_value(r, value))
        known = _known_kinds(value)
        if known is not None:
            kinds &= known      # "I switched to Spotify": no phone, editor nor employer
        if not kinds:
            return None
        old = match.groupdict().get("old")
        return Claim(kinds, _subject(match), norm(value), norm(old) if old else None,
                     open=True)
    return None


def claims(content: str, *, new: bool = False) -> list[Claim]:
    """What ``content`` says of single-valued relations, a claim for each clause that does.
    ``new``: a statement that may replace a fact, whose additions ("a second job") do not,
    nor a loose "I'm at X" said with no word of a change ("I'm at the Marriott, room 412" is
    where the user is; "I'm now at Globex" is a new employer)."""
    found: list[Claim] = []
    for clause in clauses(content):
        if new and _ADDED.search(clause):
            continue
        claim = _claim(clause)
        if claim is None or (new and claim.loose and not claim.ended
                             and not _CHANGED.search(clause)):
            continue
        found.append(claim)
    return found


def _same(a: str, b: str) -> bool:
    # "lives in Berlin since October" vs "lives in Berlin": the same value; so are "the Acme
    # warehouse" and "Acme" (a place of the same employer)
    a, b = (re.sub(r"^the\s+", "", v) for v in (a, b))
    return a.startswith(b) or b.startswith(a)


def _replaces(new: Claim, old: Claim) -> bool:
    if old.ended or new.subject != old.subject:
        return False
    relation = next(iter(old.relations))
    if len(old.relations) != 1 or relation not in new.relations:
        return False
    if new.ended:
        # the name ended, not a longer one that starts with it ("I left Google Docs")
        return old.value == new.value or old.value.startswith(new.value + " ")
    if new.old is not None and not _same(new.old, old.value):
        return False
    return not _same(new.value, old.value)


def contradicts(new: str, old: str) -> bool:
    """Whether ``new`` gives another value for the same subject and single-valued relation as
    ``old`` (or ends the value ``old`` gives). The words must say which relation: an open
    "switched to X" is left to :func:`replaced`, which sees the other facts."""
    news = [c for c in claims(new, new=True) if c.definite]
    olds = [c for c in claims(old) if c.definite]
    return any(_replaces(n, o) for n in news for o in olds)


# -- what a statement the user makes outright replaces -----------------------------------------

# Words of the stored facts a relation's claims come from, to find them by (the user's facts
# of that relation that share no word with the new statement: "I'm now at Globex").
_RELATION_WORDS = {
    "lives_in": "lives live living moved based resides relocated home city",
    "works_at": "works work working employed job joined employer company",
    "age": "years old age",
}
# What a negation that reads no single-valued relation compares: its words, not these.
_FILLER = frozenset("""
    the user user's i i'm me my a an any anymore more longer no not never don't doesn't do does
    is am are was be have has had to at in on of for with and or now currently really still
    stopped
""".split())  # noqa: SIM905 - a word list reads better as text
_WORD = re.compile(r"[\w']+")


def lookup_words(content: str) -> list[str]:
    """Words to find the stored facts a user's statement may replace by, beyond its own."""
    words: list[str] = []
    for claim in claims(content, new=True):
        for relation in sorted(claim.relations):
            kind = relation.partition(":")[2]
            words.extend((_RELATION_WORDS.get(relation) or kind).split())
            if kind == "favourite" or kind.startswith("favourite "):
                words.append(kind.replace("favourite", "favorite"))
        words.extend(claim.value.split()[:3])
        if claim.old:
            words.extend(claim.old.split()[:3])
    if not words:
        words = [w for w, _ in (_denial(c) or ("", "") for c in clauses(content)) if w]
    return list(dict.fromkeys(w for w in words if w))


def _stem(word: str) -> str:
    word = word.casefold().strip("'")
    word = re.sub(r"'s$", "", word)
    for ending in ("ing", "ies", "es", "ed", "s", "e"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            return word[: -len(ending)]
    return word


def _content_words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.casefold()) if w not in _FILLER}


def _denial(clause: str) -> tuple[str, str] | None:
    """(subject, the rest) of a negated clause about the user ("the user doesn't eat meat
    anymore": ("the user", "eat meat")), or None."""
    plain, negated = _negated(clause)
    if not negated:
        return None
    match = re.match(r"^(the user(?:'s\s+\w+)?)\s+(.+)$", plain, re.I)
    if not match or _PASSING.search(match.group(2)):
        return None
    return match.group(1).casefold(), match.group(2)


def _denies(clause: str, old: str) -> bool:
    """Whether a negated clause of the user's says the opposite of ``old``: the same subject,
    and every word it negates in ``old`` ("I don't eat meat anymore" / "The user eats meat")."""
    denial = _denial(clause)
    if denial is None or claims(old) and any(c.ended for c in claims(old)):
        return False
    subject, rest = denial
    stored = _said(old).strip()
    stored = _as_user(stored)
    if not stored.casefold().startswith(subject + " ") or \
            stored.casefold().startswith(subject + "'s"):
        return False
    if _negated(stored)[1]:
        return False        # the stored fact says "not" already: no opposite of it here
    words = _content_words(rest)
    said = _content_words(stored[len(subject):])
    # and at least half of it: "I don't run anymore" is no opposite of "The user runs a bakery
    # in Porto", nor "I don't drink anymore" of "The user drinks coffee every morning"
    return bool(words) and words <= said and 2 * len(words) >= len(said)


def replaced(new: str, olds: Sequence[str]) -> list[int]:
    """The positions in ``olds`` (stored facts) that ``new``, a statement the user makes
    outright, replaces: another value of a single-valued relation, the end of one, or the
    opposite of what a fact says. An open "switched to X" replaces the facts of one relation
    only: when the stored facts it could be about are of several, the rules are unsure and
    nothing is replaced."""
    found: list[int] = []
    new_claims = claims(new, new=True)
    old_claims = [[c for c in claims(old) if c.definite or c.loose] for old in olds]
    for claim in new_claims:
        hits = [i for i, cs in enumerate(old_claims) if any(_replaces(claim, o) for o in cs)]
        if not claim.definite:
            kinds = {next(iter(o.relations)) for i in hits for o in old_claims[i]
                     if _replaces(claim, o)}
            if len(kinds) > 1:
                continue
        found.extend(hits)
    if not new_claims:
        for clause in clauses(new):
            found.extend(i for i, old in enumerate(olds) if _denies(clause, old))
    return sorted(set(found))
