// libxml2 as rangeget's Metalink reader uses it: the SAX2 push parser.
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, so encoding.h would declare ICU's
// types (UErrorCode, UChar). Foundation ships an ICU of its own, and a
// module that sees both fails to build ("'UErrorCode' has different
// definitions in different modules", first met by the test runner's
// generated module). rangeget never touches an encoding handler's fields,
// the only declarations that need ICU, so they are left out here.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/SAX2.h>
