# rename.awk: one page of swift-argument-parser's generate-manual, renamed to
# the git/Debian convention and made readable by man-db. Variables: fname
# (keyshare-token-create), version. What changes, and why:
#  - .Dt and .Xr name pages by file name: KEYSHARE.TOKEN.CREATE -> KEYSHARE-TOKEN-CREATE,
#    .Xr keyshare.token.create 1 -> .Xr keyshare-token-create 1;
#  - NAME: `.Nm "keyshare token create"` -> `.Nm keyshare-token-create` (lexgrog,
#    hence mandb and lintian, cannot parse a quoted name with spaces), and the
#    SYNOPSIS and EXIT STATUS keep the command as it is typed: `.Nm "keyshare token create"`;
#  - .Nd loses its quotes (they would show in `man -k`); a word that is an mdoc
#    macro name gets \& so it stays a word;
#  - .Os names the product and version (the footer; empty it says "BSD");
#  - keyshare(1)'s SEE ALSO also names keyshare-pkcs11(7); every page ends in a newline.
BEGIN {
  n = split("Ac Ad An Ao Ap Aq Ar At Bc Bo Bq Brc Bro Brq Bsx Bx Cd Cm Dc Do Dq Dv Dx Ec Em En Eo Er Es Ev " \
            "Fa Fc Fl Fn Fo Fr Ft Fx Ic Li Lk Ms Mt Nm No Ns Nx Oc Oo Op Ox Pa Pc Pf Po Pq Qc Ql Qo Qq " \
            "Sc Sh Sm So Sq Ss St Sx Sy Tn Ux Va Vt Xc Xo Xr", m, " ")
  for (i = 1; i <= n; i++) macro[m[i]] = 1
}
/^\.Dt / { $2 = toupper(fname) }
/^\.Os$/ { $0 = ".Os keyshare " version }
/^\.Sh / { section = $0 }
section == ".Sh NAME" && /^\.Nm "/ { typed = substr($0, 5); $0 = ".Nm " fname }
section == ".Sh SYNOPSIS" && /^\.Nm$/ && typed != "" { $0 = ".Nm " typed }
/^\.Ex -std$/ && typed != "" { $0 = ".Ex -std " typed }
/^\.Nd "/ {
  text = substr($0, 6, length($0) - 6)
  k = split(text, w, " "); out = ""
  for (i = 1; i <= k; i++) out = out (i > 1 ? " " : "") ((w[i] in macro) ? "\\&" : "") w[i]
  $0 = ".Nd " out
}
/^\.Xr keyshare\./ { gsub(/\./, "-", $2) }
{ if (NR > 1) print last; last = $0 }
END {
  if (fname == "keyshare" && last ~ /^\.Xr / && last !~ /,$/) { print last " ,"; print ".Xr keyshare-pkcs11 7" }
  else print last
}
