// libcurl, for the record handler's upload when a recording is done (HTTP PUT) and the stream handler's HLS origin
// (PUT, DELETE). curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: the shims below are
// their typed forms (a read callback has a write callback's type).
#include <curl/curl.h>

static inline CURLcode ccurl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode ccurl_setopt_offset(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode ccurl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode ccurl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode ccurl_setopt_xferinfo(CURL *curl, curl_xferinfo_callback callback) {
    return curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, callback);
}
static inline CURLcode ccurl_setopt_write(CURL *curl, CURLoption option, curl_write_callback callback) {
    return curl_easy_setopt(curl, option, callback);
}
static inline CURLcode ccurl_response_code(CURL *curl, long *code) {
    return curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
}
